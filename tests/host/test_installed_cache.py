"""What is installed, kept between CLI processes (``latch.installed``): the answers follow every install, upgrade,
edit and removal of a distribution, and the plugin host and ``latch plugins`` see them."""

from __future__ import annotations

import importlib
import json
import os
import sys
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner

from latch import installed, plugins


def _dist(root: Path, name: str, version: str, entry_points: str | None) -> Path:
    """A ``*.dist-info`` folder under ``root`` as pip writes one (``entry_points``: the file's text, or none)."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    return info


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on ``sys.path`` for fake distributions, and a cache file (the state of a fresh process)."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    cache = tmp_path / "home" / "cache" / "installed.json"
    installed.use_installed_cache(cache)
    yield root, cache
    installed.use_installed_cache(None)


def _new_process(cache: Path) -> None:
    """What a new process knows: the file only."""
    importlib.invalidate_caches()
    installed.use_installed_cache(cache)


def _names(group: str) -> dict[str, str]:
    return {ep.name: ep.value for ep in installed.entry_points(group)}


def test_answers_are_kept_and_served_without_reading_metadata(site, monkeypatch):
    root, cache = site
    _dist(root, "latch-kept", "1.0", "[latch.test]\nkept = json:dumps\n")
    assert _names("latch.test") == {"kept": "json:dumps"}
    assert installed.version("latch-kept") == "1.0"
    [doc] = json.loads(cache.read_text(encoding="utf-8"))["installations"].values()
    assert doc["groups"]["latch.test"][0]["name"] == "kept" and doc["versions"] == {"latch-kept": "1.0"}

    def unread(*args, **kwargs):
        raise AssertionError("the installation is unchanged: the kept answer serves")

    monkeypatch.setattr(metadata, "entry_points", unread)
    monkeypatch.setattr(metadata, "version", unread)
    _new_process(cache)
    [ep] = installed.entry_points("latch.test")
    assert (ep.name, ep.dist, ep.version, ep.load()) == ("kept", "latch-kept", "1.0", json.dumps)
    assert installed.version("latch-kept") == "1.0"


def test_install_upgrade_edit_and_removal_are_seen(site):
    root, cache = site
    assert _names("latch.test") == {} and installed.version("latch-moving") is None
    info = _dist(root, "latch-moving", "1.0", "[latch.test]\nmoving = json:dumps\n")  # installed
    _new_process(cache)
    assert _names("latch.test") == {"moving": "json:dumps"} and installed.version("latch-moving") == "1.0"

    os.rename(info, info.with_name("latch_moving-2.0.dist-info"))  # upgraded (pip: a new folder)
    info = info.with_name("latch_moving-2.0.dist-info")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: latch-moving\nVersion: 2.0\n", encoding="utf-8")
    _new_process(cache)
    assert installed.version("latch-moving") == "2.0"

    ep_file = info / "entry_points.txt"  # edited in place: another entry point, same size
    ep_file.write_text("[latch.test]\nmoving = json:loads\n", encoding="utf-8")
    stat = ep_file.stat()
    os.utime(ep_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    _new_process(cache)
    assert _names("latch.test") == {"moving": "json:loads"}

    for f in info.iterdir():  # removed
        f.unlink()
    info.rmdir()
    _new_process(cache)
    assert _names("latch.test") == {} and installed.version("latch-moving") is None


def test_an_egg_info_upgraded_in_place_is_seen(site):
    root, cache = site
    egg = root / "latch_egg.egg-info"  # a develop install: the folder keeps its name across versions
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: latch-egg\nVersion: 1.0\n", encoding="utf-8")
    assert installed.version("latch-egg") == "1.0"
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: latch-egg\nVersion: 1.10\n", encoding="utf-8")
    _new_process(cache)
    assert installed.version("latch-egg") == "1.10"


def test_another_path_is_another_installation_and_both_are_kept(site, tmp_path, monkeypatch):
    root, cache = site
    assert _names("latch.test") == {}
    other = tmp_path / "other-site"
    _dist(other, "latch-elsewhere", "0.1", "[latch.test]\nelsewhere = json:dumps\n")
    monkeypatch.syspath_prepend(str(other))
    _new_process(cache)
    assert _names("latch.test") == {"elsewhere": "json:dumps"}
    with_other = list(sys.path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(other)])
    _new_process(cache)
    assert _names("latch.test") == {}
    assert len(json.loads(cache.read_text(encoding="utf-8"))["installations"]) == 2

    def unread(*args, **kwargs):
        raise AssertionError("both installations are kept")

    monkeypatch.setattr(metadata, "entry_points", unread)
    for path, expected in ((with_other, {"elsewhere": "json:dumps"}), ([p for p in with_other if p != str(other)], {})):
        monkeypatch.setattr(sys, "path", path)
        _new_process(cache)
        assert _names("latch.test") == expected


def test_a_damaged_file_is_ignored_and_replaced(site):
    root, cache = site
    _dist(root, "latch-kept", "1.0", "[latch.test]\nkept = json:dumps\n")
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json", encoding="utf-8")
    _new_process(cache)
    assert _names("latch.test") == {"kept": "json:dumps"}
    [doc] = json.loads(cache.read_text(encoding="utf-8"))["installations"].values()
    assert doc["groups"]["latch.test"][0]["value"] == "json:dumps"


PLUGIN = """
from latch.hookspecs import hookimpl


@hookimpl
def latch_register_engines():
    return []
"""


def test_latch_plugins_sees_a_plugin_installed_and_removed_between_commands(tmp_path, monkeypatch):
    from latch.cli import cli

    root = tmp_path / "site"
    root.mkdir()
    (root / "latch_kept_plugin.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    env = {"LATCH_HOME": str(tmp_path / "home"), "COLUMNS": "300"}

    def listed() -> str:
        plugins.reset_plugin_manager()
        importlib.invalidate_caches()
        res = CliRunner().invoke(cli, ["plugins"], env=env)
        assert res.exit_code == 0, res.output
        return res.output

    try:
        assert "latch-kept-plugin" not in listed()
        assert (tmp_path / "home" / "cache" / "installed.json").is_file()
        info = _dist(root, "latch-kept-plugin", "0.7", "[latch]\nkept = latch_kept_plugin\n")
        assert "latch-kept-plugin" in listed()
        for f in info.iterdir():
            f.unlink()
        info.rmdir()
        assert "latch-kept-plugin" not in listed()
    finally:
        plugins.reset_plugin_manager()
