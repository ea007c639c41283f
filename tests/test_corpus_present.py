"""Guard: parametrized corpus tests collect nothing without the corpus, so check it exists."""

from corpus_support import corpus_files, require_corpus


def test_corpus_has_the_eight_transcripts():
    require_corpus()
    names = sorted(p.name for p in corpus_files())
    assert len(names) == 8, names
