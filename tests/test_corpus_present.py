"""Guard: the corpus is present (parametrized corpus tests collect nothing without it) and open.

Every corpus file's format (its top-level folder) has a built-in importer, or is named with a
reason in ``corpus_support.NO_IMPORTER_YET``; an entry there whose format has gained an importer,
or that no corpus file uses, fails too, so the allowlist cannot go stale. ``.ci/run`` runs this
module by name before the suite.
"""

from corpus_support import NO_IMPORTER_YET, corpus_files, corpus_format, corpus_name, require_corpus
from latch.importers import builtin_importers, detect


def test_corpus_is_present():
    require_corpus()
    # the eight files of the first corpus are still there (the corpus only grows)
    assert len(corpus_files()) >= 8


def test_every_corpus_file_has_an_importer_or_is_allowlisted():
    require_corpus()
    known = {c.PLUGIN_NAME for c in builtin_importers()}
    orphans = [corpus_name(p) for p in corpus_files() if corpus_format(p) not in known | set(NO_IMPORTER_YET)]
    assert not orphans, f"corpus files of a format with no importer and not in NO_IMPORTER_YET: {orphans}"


def test_the_allowlist_is_not_stale():
    require_corpus()
    known = {c.PLUGIN_NAME for c in builtin_importers()}
    used = {corpus_format(p) for p in corpus_files()}
    assert not set(NO_IMPORTER_YET) & known, "these formats have an importer now: remove them from NO_IMPORTER_YET"
    assert set(NO_IMPORTER_YET) <= used, f"NO_IMPORTER_YET names formats the corpus lacks: {set(NO_IMPORTER_YET) - used}"


def test_content_detection_agrees_with_the_folder():
    """Auto-detection (no ``--format``) picks the folder's importer for every importable corpus file."""
    require_corpus()
    for p in corpus_files():
        if corpus_format(p) not in NO_IMPORTER_YET:
            assert detect(p, p.read_bytes()).PLUGIN_NAME == corpus_format(p), corpus_name(p)
