"""Exact token counts of texts kept between processes (``latch.count_cache``)."""

from __future__ import annotations

import json

import pytest

from latch import count_cache
from latch.engine.units import TokenCounter
from latch.estimators import HeuristicEstimator


class CountingExact:
    """An exact estimator (one token per word) that records every text it was asked to count."""

    EXACT = True
    TOKENIZER = "words:v1"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def estimate(self, text: str) -> int:
        self.asked.append(text)
        return len(text.split())

    def image_tokens(self, width, height) -> int:
        return 85


@pytest.fixture
def cache_file(tmp_path, monkeypatch):
    """A kept-counts file, and this process's state as a fresh process has it (restored afterwards)."""
    monkeypatch.setattr(count_cache, "_file", None)
    monkeypatch.setattr(count_cache, "_memo", None)
    monkeypatch.setattr(count_cache, "_fresh", {})
    monkeypatch.setattr(count_cache, "_exit_hook", True)  # saved by the test, not at exit
    return tmp_path / "cache" / "token-counts.json"


def _new_process(path) -> None:
    count_cache._fresh.clear()
    count_cache.use_count_cache(path)


def test_a_later_process_counts_nothing_it_counted_before(cache_file):
    _new_process(cache_file)
    first = CountingExact()
    counter = TokenCounter(first)
    assert counter.fixed("You are a careful agent.") == 5 and counter.text("ä \ud800 lone") == 3
    count_cache.save_count_cache()
    keys = json.loads(cache_file.read_text(encoding="utf-8"))["counts"]
    assert len(keys) == 2 and all(k.startswith("words:v1\x00") for k in keys)

    _new_process(cache_file)
    again = CountingExact()
    counter = TokenCounter(again)
    assert counter.fixed("You are a careful agent.") == 5 and counter.text("ä \ud800 lone") == 3
    assert counter.text("something new here") == 3
    assert again.asked == ["something new here"]  # the kept texts were not counted again


def test_another_tokenizer_does_not_reuse_the_counts(cache_file):
    _new_process(cache_file)
    TokenCounter(CountingExact()).text("one two three")
    count_cache.save_count_cache()
    _new_process(cache_file)

    class Other(CountingExact):
        TOKENIZER = "words:v2"

    other = Other()
    assert TokenCounter(other).text("one two three") == 3 and other.asked == ["one two three"]


def test_nothing_is_kept_without_a_file_or_for_a_heuristic(cache_file, tmp_path):
    exact = CountingExact()
    assert TokenCounter(exact).text == exact.estimate  # no file in use: the estimator itself
    _new_process(cache_file)
    heuristic = HeuristicEstimator("openai")
    assert TokenCounter(heuristic).text == heuristic.estimate  # not exact: nothing kept
    count_cache.save_count_cache()
    assert not cache_file.exists()


@pytest.mark.parametrize("content", ["{not json", '{"counts": [1, 2]}', '{"counts": {"words:v1\\u0000x": -1}}'])
def test_an_unreadable_file_is_ignored_and_replaced(cache_file, content):
    cache_file.parent.mkdir(parents=True)
    cache_file.write_text(content, encoding="utf-8")
    _new_process(cache_file)
    exact = CountingExact()
    assert TokenCounter(exact).text("a b") == 2 and exact.asked == ["a b"]
    count_cache.save_count_cache()
    assert list(json.loads(cache_file.read_text(encoding="utf-8"))["counts"].values()) == [2]


def test_the_file_keeps_the_newest_counts_only(cache_file, monkeypatch):
    monkeypatch.setattr(count_cache, "COUNT_CACHE_ENTRIES", 3)
    _new_process(cache_file)
    counter = TokenCounter(CountingExact())
    for i in range(5):
        counter.text(f"text {i}")
    count_cache.save_count_cache()
    assert len(json.loads(cache_file.read_text(encoding="utf-8"))["counts"]) == 3
    _new_process(cache_file)
    exact = CountingExact()
    counter = TokenCounter(exact)
    for i in range(5):
        counter.text(f"text {i}")
    assert exact.asked == ["text 0", "text 1"]  # the oldest were dropped


def test_a_cache_whose_folder_is_a_file_is_not_written_and_raises_nothing(tmp_path, cache_file):
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    _new_process(blocker / "cache" / "token-counts.json")
    counter = TokenCounter(CountingExact())
    assert counter.text("one two three") == 3
    count_cache.save_count_cache()  # NotADirectoryError, not caught, before the counts were kept by one helper
    assert blocker.read_text(encoding="utf-8") == "" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    assert count_cache._fresh  # not kept: the next save tries again
