"""The plugin host: loading, environment switches, hook validation, registries, engine selection."""

from __future__ import annotations

import importlib
import json
import re
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from latch import hookspecs, plugins
from latch.plugins import DEFAULT_PLUGINS, PluginError, get_plugin_manager

REPO = Path(__file__).resolve().parents[2]
BUILTINS_ONLY = {"LATCH_LOAD_PLUGINS": ""}


@pytest.fixture(autouse=True)
def _fresh_manager():
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


_counter = iter(range(10**6))


def install_fake_plugin(
    monkeypatch,
    tmp_path: Path,
    source: str,
    *,
    entry_name: str = "fake",
    dist: str = "latch-fake",
    version: str = "0.3",
) -> str:
    """Write a module plus a ``*.dist-info`` (METADATA, entry_points.txt) on ``sys.path``.

    ``importlib.metadata`` then finds the entry point exactly as one installed by
    pip. Returns the (unique) module name.
    """
    module = f"latch_fake_plugin_{next(_counter)}"
    root = tmp_path / f"site-{module}"
    root.mkdir()
    (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[latch]\n{entry_name} = {module}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    return module


ENGINE_PLUGIN = """
    from latch.hookspecs import hookimpl

    class NothingEngine:
        PLUGIN_NAME = "{name}"
        DESCRIPTION = "Keeps nothing."

        def __init__(self, profile):
            self.profile = profile

        @classmethod
        def factory(cls, profile):
            return cls(profile)

    @hookimpl
    def latch_register_engines():
        return [NothingEngine]
"""


# ---------------------------------------------------------------- loading and the environment


def test_set_but_empty_allowlist_leaves_only_the_builtins(monkeypatch, tmp_path):
    install_fake_plugin(monkeypatch, tmp_path, ENGINE_PLUGIN.format(name="nothing"))
    pm = get_plugin_manager(BUILTINS_ONLY)
    assert list(pm.infos) == list(DEFAULT_PLUGINS)
    assert all(info.builtin for info in pm.infos.values())
    assert list(pm.registry("engines")) == ["continuity"]
    assert pm.registry("engines")["continuity"].plugin.name == "latch.default_plugins.engines"


def test_builtin_importers_are_registered_through_the_hook():
    from latch.importers import builtin_importers

    pm = get_plugin_manager(BUILTINS_ONLY)
    expected = {cls.PLUGIN_NAME: cls for cls in builtin_importers()}
    assert expected, "latch ships importers"
    assert {n: r.cls for n, r in pm.registry("importers").items()} == expected
    assert {r.plugin.name for r in pm.registry("importers").values()} == {"latch.default_plugins.importers"}


def test_entry_point_plugin_is_loaded_with_its_distribution(monkeypatch, tmp_path):
    module = install_fake_plugin(
        monkeypatch,
        tmp_path,
        ENGINE_PLUGIN.format(name="nothing"),
        entry_name="nothing-plugin",
        dist="latch-nothing",
        version="1.2.3",
    )
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "nothing-plugin"})
    reg = pm.registry("engines")["nothing"]
    assert reg.plugin.name == "nothing-plugin"
    assert (reg.plugin.distribution, reg.plugin.version, reg.plugin.module) == ("latch-nothing", "1.2.3", module)
    assert reg.plugin.entry_point == f"nothing-plugin = {module}"
    assert not reg.plugin.builtin
    assert pm.hooks_of("nothing-plugin") == ["latch_register_engines"]
    assert sorted(pm.registry("engines")) == ["continuity", "nothing"]


def test_allowlist_excludes_unlisted_and_rejects_unknown_names(monkeypatch, tmp_path):
    install_fake_plugin(monkeypatch, tmp_path, ENGINE_PLUGIN.format(name="nothing"), entry_name="nothing-plugin")
    install_fake_plugin(
        monkeypatch, tmp_path, ENGINE_PLUGIN.format(name="other"), entry_name="other-plugin", dist="latch-other"
    )
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": " other-plugin , "})
    assert sorted(pm.registry("engines")) == ["continuity", "other"]
    with pytest.raises(PluginError, match=r"LATCH_LOAD_PLUGINS names 'nothng-plugin'.*installed: .*nothing-plugin"):
        get_plugin_manager({"LATCH_LOAD_PLUGINS": "nothng-plugin"})


def test_disable_blocks_entry_points_and_builtins_without_fallback(monkeypatch, tmp_path):
    install_fake_plugin(monkeypatch, tmp_path, ENGINE_PLUGIN.format(name="nothing"), entry_name="nothing-plugin")
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "nothing-plugin", "LATCH_DISABLE_PLUGINS": "nothing-plugin"})
    assert "nothing-plugin" not in pm.infos
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "nothing-plugin")
    monkeypatch.setenv("LATCH_DISABLE_PLUGINS", "latch.default_plugins.engines")
    assert sorted(plugins.registered_engines()) == ["nothing"]
    with pytest.raises(PluginError, match=r"unknown engine 'continuity'; registered engines: nothing"):
        plugins.get_engine_factory("continuity")


def test_disable_warns_once_about_names_that_match_no_plugin(monkeypatch, tmp_path, capsys):
    install_fake_plugin(monkeypatch, tmp_path, ENGINE_PLUGIN.format(name="nothing"), entry_name="nothing-plugin")
    monkeypatch.setattr(plugins, "_WARNED_DISABLED", set())
    env = {"LATCH_DISABLE_PLUGINS": "nothing-plugn, latch.default_plugins.engines, ghost"}
    pm = get_plugin_manager(env)
    assert "latch.default_plugins.engines" not in pm.infos and "nothing-plugin" in pm.infos
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "warning: LATCH_DISABLE_PLUGINS names 'ghost', 'nothing-plugn' (did you mean 'nothing-plugin'?), "
        "which match no plugin; known plugins: latch.default_plugins.engines, latch.default_plugins.estimators, "
        "latch.default_plugins.importers, "
    )
    assert "nothing-plugin" in err.split("known plugins: ")[1]
    get_plugin_manager(env)  # once per process
    assert capsys.readouterr().err == ""
    get_plugin_manager({"LATCH_DISABLE_PLUGINS": "latch.default_plugins.engines, nothing-plugin"})
    assert capsys.readouterr().err == ""  # every name known: silent


def test_trace_writes_hook_calls_to_stderr(capsys):
    pm = get_plugin_manager({**BUILTINS_ONLY, "LATCH_TRACE_PLUGINS": "1"})
    pm.registry("engines")
    err = capsys.readouterr().err
    assert "latch_register_engines from plugin 'latch.default_plugins.engines' [pluginmanage]\n" in err
    assert "latch_register_engines [hook]" in err
    # the built-in engine is registered by name: the result is its LazyClass
    assert (
        "finish latch_register_engines --> [[LazyClass('continuity', 'latch.engine.continuity:ContinuityEngine')]]"
        in err
    )
    pm = get_plugin_manager({**BUILTINS_ONLY, "LATCH_TRACE_PLUGINS": "0"})
    pm.registry("engines")
    assert capsys.readouterr().err == ""


def test_a_plugin_that_fails_to_import_is_named(monkeypatch, tmp_path):
    install_fake_plugin(
        monkeypatch,
        tmp_path,
        "import does_not_exist_anywhere\n",
        entry_name="broken",
        dist="latch-broken",
        version="0.0.1",
    )
    with pytest.raises(
        PluginError,
        match=r"plugin 'broken' \(latch_fake_plugin_\d+, from latch-broken\) failed to "
        r"load .*ModuleNotFoundError: No module named 'does_not_exist_anywhere'",
    ):
        get_plugin_manager({"LATCH_LOAD_PLUGINS": "broken"})


# ---------------------------------------------------------------- hook validation


def test_a_misspelled_hookimpl_fails_loudly(monkeypatch, tmp_path):
    install_fake_plugin(
        monkeypatch,
        tmp_path,
        """
        from latch.hookspecs import hookimpl

        @hookimpl
        def latch_register_engine():
            return []
    """,
        entry_name="typo",
    )
    with pytest.raises(PluginError) as err:
        get_plugin_manager({"LATCH_LOAD_PLUGINS": "typo"})
    assert re.search(
        r"plugin 'typo' \(latch_fake_plugin_\d+, from latch-fake\) implements unknown hook "
        r"'latch_register_engine'; did you mean 'latch_register_engines'\?",
        str(err.value),
    )


def test_an_unmarked_latch_function_counts_as_a_hookimpl(monkeypatch, tmp_path):
    install_fake_plugin(
        monkeypatch,
        tmp_path,
        """
        def latch_select_estimators(model):
            return None
    """,
        entry_name="unmarked",
    )
    with pytest.raises(
        PluginError, match="unknown hook 'latch_select_estimators'; did you mean 'latch_select_estimator'"
    ):
        get_plugin_manager({"LATCH_LOAD_PLUGINS": "unmarked"})


def test_a_hookimpl_with_an_unknown_argument_is_named(monkeypatch, tmp_path):
    install_fake_plugin(
        monkeypatch,
        tmp_path,
        """
        from latch.hookspecs import hookimpl

        @hookimpl
        def latch_register_commands(cli, extra):
            pass
    """,
        entry_name="badargs",
    )
    with pytest.raises(PluginError, match=r"plugin 'badargs' .*latch_register_commands.*extra"):
        get_plugin_manager({"LATCH_LOAD_PLUGINS": "badargs"})


def test_duplicate_name_error_names_both_sources(monkeypatch, tmp_path):
    module = install_fake_plugin(
        monkeypatch, tmp_path, ENGINE_PLUGIN.format(name="continuity"), entry_name="impostor", dist="latch-impostor"
    )
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "impostor"})
    with pytest.raises(PluginError) as err:
        pm.registry("engines")
    msg = str(err.value)
    assert msg.startswith(
        "engine name 'continuity' is registered twice: by plugin 'latch.default_plugins.engines' "
        "(latch.default_plugins.engines, built-in) ("
    )
    assert msg.endswith(f"and by plugin 'impostor' ({module}, from latch-impostor) ({module}.NothingEngine)")


def test_duplicate_between_two_third_party_plugins(monkeypatch, tmp_path):
    install_fake_plugin(monkeypatch, tmp_path, ENGINE_PLUGIN.format(name="same"), entry_name="first", dist="latch-a")
    install_fake_plugin(monkeypatch, tmp_path, ENGINE_PLUGIN.format(name="same"), entry_name="second", dist="latch-b")
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "first,second"})
    with pytest.raises(
        PluginError,
        match=r"'same' is registered twice: by plugin 'first' .*latch-a.* by plugin "
        r"'second' .*latch-b",
    ):
        pm.registry("engines")
    assert len(pm.registry("importers")) > 0  # other kinds are unaffected


@pytest.mark.parametrize(
    "body, message",
    [
        ("return NothingEngine", r"latch_register_engines\(\) must return a list of classes, got type"),
        (
            "return [NothingEngine()]",
            r"latch_register_engines\(\) returned <.*NothingEngine object .*>, which is not a class",
        ),
        (
            "NothingEngine.PLUGIN_NAME = ''; return [NothingEngine]",
            r"latch_fake_plugin_\d+\.NothingEngine from "
            r"latch_register_engines\(\) has no PLUGIN_NAME string",
        ),
        ("del NothingEngine.factory; return [NothingEngine]", r"engine 'nothing' \(.*NothingEngine\) lacks factory"),
    ],
)
def test_malformed_registrations_are_named(monkeypatch, tmp_path, body, message):
    install_fake_plugin(
        monkeypatch,
        tmp_path,
        f"""
        from latch.hookspecs import hookimpl

        class NothingEngine:
            PLUGIN_NAME = "nothing"

            @classmethod
            def factory(cls, profile):
                return cls()

        @hookimpl
        def latch_register_engines():
            {body}
    """,
        entry_name="malformed",
    )
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "malformed"})
    with pytest.raises(PluginError, match=r"plugin 'malformed' .*: " + message):
        pm.registry("engines")


def test_unknown_kind_is_a_value_error():
    with pytest.raises(ValueError, match="unknown plugin kind 'engine'"):
        get_plugin_manager(BUILTINS_ONLY).registry("engine")


# ---------------------------------------------------------------- engines


def test_get_engine_factory_returns_the_class_factory_and_never_falls_back(monkeypatch, tmp_path):
    install_fake_plugin(monkeypatch, tmp_path, ENGINE_PLUGIN.format(name="nothing"), entry_name="nothing-plugin")
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "nothing-plugin")
    engines = plugins.registered_engines()
    assert plugins.get_engine_factory("nothing") == engines["nothing"].factory
    with pytest.raises(PluginError) as err:
        plugins.get_engine_factory("nothng")
    assert str(err.value).startswith(
        "unknown engine 'nothng' (did you mean 'nothing'?); registered engines: continuity, nothing"
    )


def test_engine_name_precedence():
    assert plugins.engine_name(None, {}) == "continuity"
    assert plugins.engine_name(None, {"engine": {"name": "summary"}}) == "summary"
    assert plugins.engine_name("sliding-window", {"engine": {"name": "summary"}}) == "sliding-window"
    with pytest.raises(PluginError, match=r"config \[engine\] name must be a non-empty string, got 3"):
        plugins.engine_name(None, {"engine": {"name": 3}})


# An engine that sends the whole conversation; STRATEGY "rotate" starts a new epoch on every request
# (append-only bytes, but a cache rewrite each time), "rewrite" keeps epoch 1 and sends only the newest
# unit (a prefix break within the epoch).
ROTATING_ENGINE = """
    from latch.config import budget_for_model
    from latch.engine.port import ComponentTokens, ContextView
    from latch.engine.units import TokenCounter, UnitBuilder, render_session_context, resolve_estimator
    from latch.hookspecs import hookimpl

    class Rotating:
        PLUGIN_NAME = "rotating"
        DECLARATION

        def __init__(self, profile):
            self.profile, self.n = profile, 0
            self.counter = TokenCounter(resolve_estimator(profile.model, profile.estimator))

        @classmethod
        def factory(cls, profile):
            return cls(profile)

        def default_budget(self):
            return budget_for_model(self.profile.config, self.profile.model)

        def materialize(self, request):
            self.n += 1
            units = UnitBuilder().feed_all(self.profile.reader.events(until_seq=request.until_seq))
            if "STRATEGY" == "rewrite":
                units = units[-1:]
            head = render_session_context(request.session_context)
            return ContextView(
                session_id=request.session_id, system="", tools=(),
                messages=(head, *(m for u in units for m in u.messages)),
                tokens=ComponentTokens(instructions_tokens=self.counter.message(head),
                                       recent_tokens=sum(u.cost(self.counter) for u in units)),
                budget=request.budget, epoch=self.n if "STRATEGY" == "rotate" else 1)

    @hookimpl
    def latch_register_engines():
        return [Rotating]
"""
CHAT = {
    "messages": [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": "a.py and b.py"},
        {"role": "user", "content": "and the tests?"},
        {"role": "assistant", "content": "tests/test_a.py"},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "You're welcome."},
    ]
}


def _replay_with(monkeypatch, tmp_path, strategy: str, declaration: str) -> dict:
    from latch.cli.replay import run_replay
    from latch.host.ingest import import_file
    from latch.store import EventStore

    source = ROTATING_ENGINE.replace("STRATEGY", strategy).replace("DECLARATION", declaration)
    install_fake_plugin(monkeypatch, tmp_path, source, entry_name="rotating")
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "rotating")
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT), encoding="utf-8")
    with EventStore(":memory:") as store:
        sid, _, _ = import_file(store, path)
        doc, _ = run_replay(store, sid, engine="rotating")
    return doc["summary"]


def test_rotations_are_information_for_an_engine_without_hysteresis(monkeypatch, tmp_path):
    s = _replay_with(monkeypatch, tmp_path, "rotate", "")
    assert (s["requests"], s["rotations"], s["epochs"]) == (3, 2, 3)
    assert (s["hysteretic_epochs"], s["rotation_bound"], s["violations"]) == (False, None, [])


def test_an_engine_declaring_hysteretic_epochs_is_held_to_the_bound(monkeypatch, tmp_path):
    s = _replay_with(monkeypatch, tmp_path, "rotate", "HYSTERETIC_EPOCHS = True")
    assert s["hysteretic_epochs"] is True and s["rotation_bound"] == 1.0  # ~30 tokens / (0.25 * 64,000) + 1
    assert len(s["violations"]) == 1
    assert s["violations"][0].startswith("2 rotations exceed the hysteresis bound 1.0 (conversation ")


def test_a_prefix_break_within_an_epoch_is_a_violation_for_every_engine(monkeypatch, tmp_path):
    s = _replay_with(monkeypatch, tmp_path, "rewrite", "")
    assert (s["rotations"], s["prefix_breaks_within_epoch"]) == (0, 2)
    assert [v.split(": ", 1)[1] for v in s["violations"]] == [
        "not an append-only extension of the previous request in epoch 1"
    ] * 2


# ---------------------------------------------------------------- other hooks


def test_select_estimator_first_plugin_answer_wins(monkeypatch, tmp_path):
    install_fake_plugin(
        monkeypatch,
        tmp_path,
        """
        from latch.hookspecs import hookimpl

        class Fixed:
            PLUGIN_NAME = "fixed"
            def estimate(self, text): return 7
            def estimate_batch(self, texts): return [7 for _ in texts]
            def image_tokens(self, width, height): return 1

        @hookimpl
        def latch_register_estimators():
            return [Fixed]

        @hookimpl
        def latch_select_estimator(model):
            return Fixed() if model == "fixed-1" else None
    """,
        entry_name="fixed-plugin",
    )
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "fixed-plugin")
    assert plugins.select_estimator("fixed-1").estimate("anything at all") == 7
    from latch.estimators import HeuristicEstimator

    default = plugins.select_estimator("gpt-4o")
    assert isinstance(default, HeuristicEstimator) and default.profile == "o200k"  # tiktoken: gpt-4o is o200k
    assert plugins.select_estimator("gpt-3.5-turbo").profile == "openai"  # cl100k (unless latch-tiktoken answers)
    assert plugins.select_estimator("claude-sonnet-4").profile == "anthropic"
    assert plugins.select_estimator(None).profile == "anthropic"  # unknown model: the most conservative
    assert sorted(plugins.registered_estimators()) == [
        "cabi",
        "fixed",
        "heuristic-anthropic",
        "heuristic-cjk",
        "heuristic-o200k",
        "heuristic-openai",
    ]


def test_select_estimator_falls_back_to_the_heuristic_when_nobody_answers(monkeypatch):
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "")
    monkeypatch.setenv("LATCH_DISABLE_PLUGINS", "latch.default_plugins.estimators")
    chosen = plugins.select_estimator("gpt-4o")
    assert (type(chosen).__name__, chosen.profile) == ("HeuristicEstimator", "o200k")
    chosen = plugins.select_estimator("gpt-4")
    assert (type(chosen).__name__, chosen.profile) == ("HeuristicEstimator", "openai")


def test_get_estimator_builds_one_by_plugin_name(monkeypatch, tmp_path):
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "")
    est = plugins.get_estimator("heuristic-cjk")
    assert (est.PLUGIN_NAME, est.name, est.estimate("漢字漢字")) == ("heuristic-cjk", "heuristic-cjk", 4)
    with pytest.raises(
        PluginError,
        match=r"unknown estimator 'heuristic-cj' \(did you mean 'heuristic-cjk'\?\); "
        r"registered estimators: cabi, heuristic-anthropic, heuristic-cjk",
    ):
        plugins.get_estimator("heuristic-cj")
    monkeypatch.setenv("LATCH_CABI_LIBRARY", str(tmp_path / "missing.so"))
    with pytest.raises(
        PluginError,
        match=r"estimator 'cabi' \(plugin 'latch.default_plugins.estimators' .*\) "
        r"cannot be created: CabiError: .*missing.so",
    ):
        plugins.get_estimator("cabi")


def test_an_estimator_lacking_part_of_the_interface_is_named(monkeypatch, tmp_path):
    install_fake_plugin(
        monkeypatch,
        tmp_path,
        """
        from latch.hookspecs import hookimpl

        class Counting:  # the retired spelling
            PLUGIN_NAME = "counting"
            def count(self, text): return 1
            def image_tokens(self, media): return 1

        @hookimpl
        def latch_register_estimators():
            return [Counting]
    """,
        entry_name="counting",
    )
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "counting"})
    with pytest.raises(
        PluginError,
        match=r"plugin 'counting' .*: estimator 'counting' \(.*Counting\) lacks "
        r"estimate, estimate_batch$",
    ):
        pm.registry("estimators")


def test_every_builtin_estimator_follows_the_estimator_protocol(monkeypatch):
    from latch.estimators import Estimator
    from latch.estimators.cabi import default_library_path

    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "")
    monkeypatch.delenv("LATCH_CABI_LIBRARY", raising=False)
    names = ["heuristic-openai", "heuristic-o200k", "heuristic-anthropic", "heuristic-cjk"]
    if default_library_path() is not None:  # a native build ships Latch's own C-ABI library
        names.append("cabi")
    for name in names:
        est = plugins.get_estimator(name)
        assert isinstance(est, Estimator), name
        assert est.estimate_batch(["ab", ""]).tolist() == [est.estimate("ab"), 0], name
        assert est.image_tokens(512, 512) > 0 and est.image_tokens(None, None) >= est.image_tokens(512, 512), name


def test_configure_is_historic(monkeypatch, tmp_path):
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "")
    seen = []

    class Late:
        @hookspecs.hookimpl
        def latch_configure(self, config):
            seen.append(dict(config))

    plugins.configure({"engine": {"name": "summary"}})
    get_plugin_manager().register(Late(), name="late")
    assert seen == [{"engine": {"name": "summary"}}]


def test_the_cli_reads_the_config_once_and_calls_latch_configure_with_it(monkeypatch, tmp_path):
    module = install_fake_plugin(
        monkeypatch,
        tmp_path,
        """
        from latch.hookspecs import hookimpl

        SEEN = []

        @hookimpl
        def latch_configure(config):
            SEEN.append(config)
    """,
        entry_name="config-reader",
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[context]\nrecent_tokens = 6000\n\n[config-reader]\ncolour = "blue"\n', encoding="utf-8"
    )
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CHAT), encoding="utf-8")
    env = {"LATCH_HOME": str(home), "LATCH_LOAD_PLUGINS": "config-reader"}
    result = CliRunner().invoke(_cli(), ["--db", str(tmp_path / "x.db"), "replay", str(chat), "--json", "-"], env=env)
    assert result.exit_code == 0, result.output
    expected = {"context": {"recent_tokens": 6000}, "config-reader": {"colour": "blue"}}
    assert importlib.import_module(module).SEEN == [expected]
    assert json.loads(result.output)["budget"]["recent_tokens"] == 6000  # the same mapping reached the engine


def test_plugins_add_cli_commands(monkeypatch, tmp_path):
    install_fake_plugin(
        monkeypatch,
        tmp_path,
        """
        import click
        from latch.hookspecs import hookimpl

        @hookimpl
        def latch_register_commands(cli):
            @cli.command("hello")
            def hello():
                click.echo("hello from a plugin")
    """,
        entry_name="hello-plugin",
    )
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "hello-plugin")
    group = click.Group("latch")
    plugins.register_plugin_commands(group)
    result = CliRunner().invoke(group, ["hello"])
    assert result.output == "hello from a plugin\n"


def test_a_plugin_error_at_startup_is_one_warning_and_later_a_clear_error(monkeypatch, capsys):
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "no-such-plugin")
    plugins.register_plugin_commands(click.Group("latch"))
    assert capsys.readouterr().err.startswith(
        "warning: plugin commands unavailable: LATCH_LOAD_PLUGINS names 'no-such-plugin'"
    )
    result = CliRunner().invoke(_cli(), ["plugins"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: LATCH_LOAD_PLUGINS names 'no-such-plugin'")


def test_a_builtin_that_cannot_load_is_named(monkeypatch):
    real = importlib.import_module

    def import_module(name, *args):
        if name == "latch.default_plugins.estimators":
            raise ImportError("LATCH_IMPL must be auto, native or python, not 'turbo'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", import_module)
    with pytest.raises(
        PluginError,
        match=r"plugin 'latch.default_plugins.estimators' \(latch.default_plugins."
        r"estimators, built-in\) failed to load: ImportError: LATCH_IMPL must be",
    ):
        get_plugin_manager(BUILTINS_ONLY)


# ---------------------------------------------------------------- `latch plugins`


def _cli():
    from latch.cli import _load_commands, cli

    _load_commands()
    return cli


def test_latch_plugins_json_lists_builtins_hooks_and_registrations(monkeypatch):
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "")
    result = CliRunner().invoke(_cli(), ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["name"] for r in rows] == list(DEFAULT_PLUGINS)
    engines = rows[0]
    assert engines["builtin"] is True and engines["distribution"] is None and engines["source"] == "built-in"
    assert engines["hooks"] == ["latch_register_engines"]
    assert engines["registered"] == {"engines": ["continuity"]}
    estimators = next(r for r in rows if r["name"] == "latch.default_plugins.estimators")
    assert estimators["hooks"] == ["latch_register_estimators", "latch_select_estimator"]
    importers = next(r for r in rows if r["name"] == "latch.default_plugins.importers")
    from latch.importers import builtin_importers

    assert importers["registered"] == {"importers": [c.PLUGIN_NAME for c in builtin_importers()]}


def test_latch_plugins_table(monkeypatch):
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "")
    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(_cli(), ["plugins"])
    assert result.exit_code == 0, result.output
    assert f"{len(DEFAULT_PLUGINS)} plugins" in result.output
    assert "engines: continuity" in result.output
    assert "built-in" in result.output


def test_latch_plugins_reports_a_plugin_error_without_traceback(monkeypatch, tmp_path):
    install_fake_plugin(monkeypatch, tmp_path, ENGINE_PLUGIN.format(name="continuity"), entry_name="impostor")
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "impostor")
    result = CliRunner().invoke(_cli(), ["plugins", "--json"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: engine name 'continuity' is registered twice")
    assert "Traceback" not in result.output


# ---------------------------------------------------------------- docs


def test_every_hook_has_a_section_in_docs():
    doc = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^## `(latch_\w+)", doc, flags=re.M))
    hooks = {n for n in vars(hookspecs) if n.startswith("latch_")}
    assert hooks == {
        "latch_register_engines",
        "latch_register_estimators",
        "latch_register_providers",
        "latch_register_importers",
        "latch_register_uis",
        "latch_register_commands",
        "latch_select_estimator",
        "latch_configure",
        "latch_register_derivation_rules",
    }
    missing = hooks - documented
    assert not missing, f"hooks without a section in docs/plugins.md: {sorted(missing)}"
    assert documented <= hooks, f"docs/plugins.md documents hooks that do not exist: {sorted(documented - hooks)}"


def test_a_raising_register_hook_is_named(monkeypatch, tmp_path):
    install_fake_plugin(
        monkeypatch,
        tmp_path,
        """
        from latch.hookspecs import hookimpl

        @hookimpl
        def latch_register_uis():
            raise RuntimeError("no display")
    """,
        entry_name="crashy",
        dist="latch-crashy",
    )
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "crashy"})
    with pytest.raises(
        PluginError,
        match=r"plugin 'crashy' \(.*from latch-crashy\): latch_register_uis\(\) raised "
        r"RuntimeError: no display",
    ):
        pm.registry("uis")


# ---------------------------------------------------------------- derivation rules
RULE_PLUGIN = """
    from latch.hookspecs import hookimpl
    from latch.kernel.derive import DerivationRule
    from latch.kernel.events import Mutation

    class DeployRule(DerivationRule):
        PLUGIN_NAME = "{name}"
        tools = frozenset({{"deploy_site", "Bash"}})

        def derive(self, call, result, ctx):
            return [Mutation(paths=("public/index.html",), tool=call.name)]

    @hookimpl
    def latch_register_derivation_rules():
        return [DeployRule]
"""


def test_builtin_derivation_rules_come_through_the_hook_in_their_fixed_order():
    pm = get_plugin_manager(BUILTINS_ONLY)
    assert [c.PLUGIN_NAME for c in plugins.registered_derivation_rules(pm)] == [
        "file_tools",
        "apply_patch",
        "plan",
        "codex_exec",
        "process_poll",
        "shell",
    ]
    assert pm.registry("derivation_rules")["shell"].plugin.name == "latch.default_plugins.derivation"


def test_a_plugin_rule_runs_before_the_builtins_in_the_host_cache(monkeypatch, tmp_path):
    from kernel_support import session, turn

    from latch.host.kernel import kernel_cache
    from latch.kernel import canonical_state
    from latch.store import EventStore

    install_fake_plugin(monkeypatch, tmp_path, RULE_PLUGIN.format(name="deploy"), entry_name="deploy")
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "deploy"})
    names = [c.PLUGIN_NAME for c in plugins.registered_derivation_rules(pm)]
    assert names == ["deploy", "file_tools", "apply_patch", "plan", "codex_exec", "process_poll", "shell"]
    store = EventStore(tmp_path / "rules.db")
    sid = session(store)
    turn(store, sid, "deploy_site", {"target": "prod"}, "ok")
    turn(store, sid, "Bash", {"command": "ls"}, "a.py")  # the plugin took Bash over from the shell rule
    cache = kernel_cache(pm)
    assert kernel_cache(pm) is cache and [r.name for r in cache.rules] == names
    assert canonical_state(store, sid, cache=cache).generation == 2
    assert canonical_state(store, sid).generation == 0  # the kernel alone: built-in rules only
    store.close()


def test_a_derivation_rule_name_taken_twice_is_named(monkeypatch, tmp_path):
    install_fake_plugin(
        monkeypatch, tmp_path, RULE_PLUGIN.format(name="shell"), entry_name="myshell", dist="latch-myshell"
    )
    pm = get_plugin_manager({"LATCH_LOAD_PLUGINS": "myshell"})
    with pytest.raises(
        PluginError,
        match=r"derivation_rule name 'shell' is registered twice: by plugin "
        r"'latch.default_plugins.derivation' .* and by plugin 'myshell'",
    ):
        plugins.registered_derivation_rules(pm)
