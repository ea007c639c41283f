"""Guard: the corpus is present (parametrized corpus tests collect nothing without it) and open.

Every corpus file's format (its top-level folder) has a built-in importer, or is named with a
reason in ``corpus_support.NO_IMPORTER_YET``; an entry there whose format has gained an importer,
or that no corpus file uses, fails too, so the allowlist cannot go stale. ``.ci/run`` runs this
module by name before the suite.
"""

import shutil

import pytest
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
    assert set(NO_IMPORTER_YET) <= used, (
        f"NO_IMPORTER_YET names formats the corpus lacks: {set(NO_IMPORTER_YET) - used}"
    )


def test_content_detection_agrees_with_the_folder():
    """Auto-detection (no ``--format``) picks the folder's importer for every importable corpus file."""
    require_corpus()
    for p in corpus_files():
        if corpus_format(p) not in NO_IMPORTER_YET:
            assert detect(p, p.read_bytes()).PLUGIN_NAME == corpus_format(p), corpus_name(p)


def test_a_new_file_of_a_known_format_needs_no_edit(tmp_path, monkeypatch):
    """A copy of the corpus grown by a Claude Code session, an Aider history whose last run never reached the
    model, and a file of a format no importer knows: the first two become corpus items with no edit here, the
    last is named by the orphan check."""
    import corpus_support

    copy = tmp_path / "corpus"
    shutil.copytree(require_corpus(), copy)
    shutil.copy(copy / "claude-code" / "bastion_claude-session.jsonl", copy / "claude-code" / "zz-grown.jsonl")
    aider = (copy / "aider" / "mozgoslav.aider.chat.history.md").read_text(encoding="utf-8")
    (copy / "aider" / "zz-unanswered.aider.chat.history.md").write_text(
        aider + "\n# aider chat started at 2026-12-04 10:00:00\n\n#### и всё?  \n\n"
        "> litellm.APIError: OpenGPU error 403: no access  \n",
        encoding="utf-8",
    )
    monkeypatch.setattr(corpus_support, "CORPUS", copy)
    corpus_support._items.cache_clear()
    try:
        test_every_corpus_file_has_an_importer_or_is_allowlisted()
        test_content_detection_agrees_with_the_folder()
        names = [corpus_support.item_name(i) for i in corpus_support.corpus_items()]
        assert "claude-code/zz-grown.jsonl" in names
        (run,) = [n for n in names if n.startswith("aider/zz-unanswered")]
        assert "#" in run  # its last run that asked the model, not the unanswered one import_file takes
        (copy / "newharness").mkdir()
        (copy / "newharness" / "log.json").write_text("{}", encoding="utf-8")
        with pytest.raises(AssertionError, match=r"newharness/log\.json"):
            test_every_corpus_file_has_an_importer_or_is_allowlisted()
    finally:
        corpus_support._items.cache_clear()
