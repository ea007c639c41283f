"""``latch.cache_files.write_cache_file``: the one writer of Latch's JSON caches (model table, prices, token counts,
installed plugins)."""

from __future__ import annotations

import os

from latch.cache_files import read_cache_file, write_cache_file


def test_the_file_is_replaced_whole_and_its_folder_made(tmp_path):
    path = tmp_path / "cache" / "kept.json"
    assert write_cache_file(path, '{"a": 1}') is True
    assert write_cache_file(path, '{"b": "\u00e9"}') is True
    assert path.read_bytes() == '{"b": "\u00e9"}'.encode()
    assert os.listdir(path.parent) == ["kept.json"]  # no temporary file is left


def test_a_refusing_file_system_gives_false_and_leaves_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    assert write_cache_file(blocker / "cache" / "kept.json", "{}") is False  # the folder is a file
    assert write_cache_file(tmp_path / "bad\x00name.json", "{}") is False  # no file system takes the path
    folder = tmp_path / "folder.json"
    folder.mkdir()
    assert write_cache_file(folder, "{}") is False  # the file is a folder: its temporary file is removed again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder.json"] and blocker.read_text() == "x"


def test_a_cache_file_reads_as_its_object_or_as_empty(tmp_path):
    path = tmp_path / "kept.json"
    assert read_cache_file(path) == {}  # absent
    for damaged in ("", "{", "[1, 2]", '"text"', "\udcff"):
        path.write_text(damaged, encoding="utf-8", errors="surrogateescape")
        assert read_cache_file(path) == {}, damaged
    path.write_text('{"counts": {"a": 1}}', encoding="utf-8")
    assert read_cache_file(path) == {"counts": {"a": 1}}
    assert read_cache_file(tmp_path) == {}  # a folder
