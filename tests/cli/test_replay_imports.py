"""What a ``latch replay`` process imports: what the replay uses, not every plugin's code.

The plugin host registers every plugin when a command first needs one; the built-ins register their engine and
their providers by name (:class:`latch.hookspecs.LazyClass`), so a replay imports the engine it runs and never the
providers, the other engines or the user interfaces. Real ``latch`` processes; ``sys.modules`` is read at exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "invoice-rounding.claude.jsonl"

# the command, then (at exit, on stderr) every module it imported, as one JSON line
MAIN = (
    "import atexit, json, sys; atexit.register(lambda: sys.stderr.write('\\nimported: ' + json.dumps(sorted("
    "sys.modules)) + '\\n')); from latch.cli import main; main()"
)
NEVER = (
    "latch.providers",  # no model is called
    "latch.ui.web.app",
    "latch.ui.tui.app",
    "latch.cli.replay_html",  # only for --html
    "genai_prices",  # the prices are kept after the first replay
    "importlib.metadata",  # the entry points are kept (latch.installed)
    "openai",
    "anthropic",
    "httpx",
    "pydantic",
    "socket",  # the replay scratch's host name comes from os.uname
    "latch.store.postgres",  # an SQLite store: the --db value is checked by latch.store.pg_url
    "tomllib",  # no config file; Latch's model table is kept parsed (latch.config.use_model_table_cache)
)
"""Modules no second replay of a stored session imports (nor any module under them)."""


# the command, then (at exit, on stderr) the event kinds whose __init__ was compiled (latch.records), as one JSON line
COMPILED = (
    "import atexit, json, sys; atexit.register(lambda: sys.stderr.write('\\nimported: ' + json.dumps(sorted("
    "c.__name__ for c in sys.modules['latch.events'].BUILTIN_KINDS if not isinstance(c.__dict__['__init__'], "
    "sys.modules['latch.records']._Lazy))) + '\\n')); from latch.cli import main; main()"
)


def _replay(tmp_path: Path, *args: str, plugins: str, main: str = MAIN) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LATCH_")}
    env.update(LATCH_HOME=str(tmp_path / "home"), COLUMNS="200", LATCH_LOAD_PLUGINS=plugins)
    cmd = [sys.executable, "-c", main, "replay", str(EXAMPLE), "--db", str(tmp_path / "latch.db"), *args]
    for _ in range(2):  # the second finds the file's fingerprint and every price kept
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert "requests" in res.stdout
    line = res.stderr.splitlines()[-1]
    assert line.startswith("imported: ")
    return set(json.loads(line.removeprefix("imported: ")))


def _under(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_a_replay_imports_its_engine_and_no_provider_or_user_interface(tmp_path):
    modules = _replay(tmp_path, plugins="")  # the built-in plugins only
    assert "latch.engine.continuity" in modules  # the default engine
    assert "latch.default_plugins.providers" in modules  # registered, by name
    assert "latch.engine.episodes" in modules  # its episode index: array("q") columns the native scorer reads
    assert _under(modules, (*NEVER, "numpy")) == []


def test_a_replay_with_a_plugin_engine_does_not_import_the_continuity_engine(tmp_path):
    pytest.importorskip("latch_example", reason="pip install ./plugins/latch-example")
    modules = _replay(tmp_path, "--engine", "keep-last-units", plugins="example")
    assert "latch_example" in modules
    unused = ("latch.engine.continuity", "latch.engine.episodes", "numpy")  # the continuity engine's
    assert _under(modules, (*unused, *NEVER)) == []


def test_the_baselines_register_their_engines_by_name_and_a_replay_imports_the_one_it_runs(tmp_path):
    pytest.importorskip("latch_example", reason="pip install ./plugins/latch-example")
    pytest.importorskip("latch_baselines", reason="pip install ./plugins/latch-baselines")
    modules = _replay(tmp_path, "--engine", "keep-last-units", plugins="example,baselines")
    assert {"latch_example", "latch_baselines"} <= modules  # the plugin is registered
    assert _under(modules, ("latch_baselines",)) == ["latch_baselines"]  # none of its engines imported
    modules = _replay(tmp_path, "--engine", "sliding-window", plugins="example,baselines")
    assert _under(modules, ("latch_baselines",)) == [
        "latch_baselines",
        "latch_baselines.base",
        "latch_baselines.sliding_window",
    ]


def test_a_replay_compiles_the_init_of_the_event_kinds_it_decodes_only(tmp_path):
    """Declaring the event kinds compiles no code (:mod:`latch.records`); a replay compiles the ``__init__`` of the
    kinds it decodes and derives, not of the agent's, the groups' or the runs' kinds."""
    compiled = _replay(tmp_path, plugins="", main=COMPILED)
    assert {"UserMessage", "AssistantMessage", "ToolResult"} <= compiled
    assert not compiled & {"RunStarted", "RunEnded", "GroupTaskCreated", "AgentProfile", "AgentReport", "SkillsListed"}
    assert len(compiled) < 12
