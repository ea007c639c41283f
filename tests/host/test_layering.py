"""Layering (``docs``/DESIGN "Layers"): which latch packages may import which.

Every module under ``src/latch`` is parsed with :mod:`ast`; every import counts, at module level
and inside functions (a lazy import is still a dependency), with relative imports resolved. A rule
names a layer (a module or package prefix) and what it may or may not import. ``EXCEPTIONS`` lists
the violations that are known and deliberate, each with its reason; the test fails on any new
violation, and on an exception that no longer happens (so the list cannot go stale).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "latch"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _imports(name: str) -> set[str]:
    """The latch modules ``name`` imports anywhere in its body (``from X import y`` counts ``X.y`` when that
    is a module, else ``X``)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES)
    return {m for m in found if m == "latch" or m.startswith("latch.")} - {name, "latch"}


IMPORTS = {name: _imports(name) for name in MODULES}


def _in(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def _under(layer: str) -> list[str]:
    return [m for m in MODULES if _in(m, layer)]


# (layer, forbidden layers) -- a module of ``layer`` imports none of them
FORBIDDEN = [
    ("latch.engine", ("latch.store", "latch.kernel", "latch.host", "latch.cli", "latch.plugins")),
    ("latch.importers", ("latch.store", "latch.kernel", "latch.plugins", "latch.host", "latch.cli")),
    ("latch.kernel", ("latch.engine", "latch.host", "latch.cli", "latch.plugins")),
]
# (layer, the only latch layers it may import)
ONLY = [
    ("latch.port", ("latch.events", "latch.records")),
    ("latch.events", ("latch.records",)),
    ("latch.store", ("latch.events", "latch.records", "latch.lazyre")),
    ("latch.records", ()),  # the data class decorator every layer declares its records with
]
# only these may import the plugin manager: the CLI and its commands, the host (and the host-like
# agent loop and bench runners, which run on the one host request loop), the
# plugin machinery itself and the built-in plugins
PLUGIN_USERS = (
    "latch.cli",
    "latch.host",
    "latch.agent",
    "latch.bench",
    "latch.plugins",
    "latch.default_plugins",
    "latch.hookspecs",
)

# (module, forbidden import): why. Each is deliberate; fix it and delete the entry.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _violations() -> set[tuple[str, str]]:
    bad: set[tuple[str, str]] = set()
    for layer, forbidden in FORBIDDEN:
        for m in _under(layer):
            bad.update((m, t) for t in IMPORTS[m] if any(_in(t, f) for f in forbidden))
    for layer, allowed in ONLY:
        for m in _under(layer):
            bad.update((m, t) for t in IMPORTS[m] if not _in(t, layer) and not any(_in(t, a) for a in allowed))
    for m, targets in IMPORTS.items():
        if not any(_in(m, u) for u in PLUGIN_USERS):
            bad.update((m, t) for t in targets if _in(t, "latch.plugins"))
    return bad


def test_the_parser_sees_function_level_and_relative_imports():
    assert "latch.host.loop" in IMPORTS["latch.cli.replay"]  # inside a function, relative, two dots
    assert "latch.events" in IMPORTS["latch.port"]
    assert "latch.store" in IMPORTS["latch.host.session"]


def test_no_new_layering_violation():
    new = sorted(_violations() - EXCEPTIONS.keys())
    assert new == [], "new layering violations (module, import):\n" + "\n".join(f"  {m} -> {t}" for m, t in new)


def test_every_listed_exception_still_happens():
    stale = sorted(EXCEPTIONS.keys() - _violations())
    assert stale == [], f"fixed: delete these from EXCEPTIONS: {stale}"


@pytest.mark.parametrize("module", ["latch.port", "latch.events", "latch.records"])
def test_leaf_modules(module):
    allowed = {
        "latch.port": {"latch.events", "latch.records"},
        "latch.events": {"latch.records"},
        "latch.records": set(),
    }[module]
    assert IMPORTS[module] <= allowed


def _subpackage(module: str) -> str:
    return ".".join(module.split(".")[:2])


# Import cycles between subpackages (latch.X <-> latch.Y through any modules); each is known and harmless at
# import time (no module-level cycle), listed so that a new one fails.
KNOWN_SUBPACKAGE_CYCLES: dict[frozenset[str], str] = {}


def _cycles() -> set[frozenset[str]]:
    edges: dict[str, set[str]] = {}
    for m, targets in IMPORTS.items():
        for t in targets:
            a, b = _subpackage(m), _subpackage(t)
            if a != b:
                edges.setdefault(a, set()).add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.add(frozenset(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_new_subpackage_import_cycle():
    assert _cycles() == set(KNOWN_SUBPACKAGE_CYCLES)


# Function-local imports of latch modules: module level is the rule; each one kept is for
# an optional dependency or to keep a heavy layer out of an import path, with its reason. (file, module).
LOCAL_IMPORTS_ALLOWED = {
    ("cli/main.py", "latch.hotpaths"): "imports numpy; `import latch.cli` and the built-in listing stay without it",
    ("cli/main.py", "latch.plugins"): "the plugin host (estimators, numpy) loads only when a command needs it (twice: "
    "AppContext.config and LatchGroup.load_plugin_commands)",
    ("cli/doctor.py", "latch._native"): "the optional C++ extension",
    ("plugins.py", "latch.textsafe"): "its warnings' format (rich, about 40 ms) loads when a warning is printed: the "
    "bench's task server builds the plugin host and prints nothing",
    ("cli/replay.py", "latch.cli.replay_html"): "the --html page and what it reads (the session's view, the canonical "
    "state) load only for --html, not with every replay",
    ("store/event_store.py", "latch.store.postgres"): 'EventStore("postgresql://…") returns the PostgreSQL store, '
    "a subclass defined in a module that imports this one",
    (
        "default_plugins/tui.py",
        "latch.ui.tui.app",
    ): "textual (about 0.2 s to import) loads only when `latch tui` starts, not with every command's plugin host",
    ("default_plugins/web.py", "latch.ui.web.app"): "the server's module (asyncio, about 0.05 s, and the routes) loads "
    "when `latch web` runs, not with every command's plugin host",
    ("ui/web/app.py", "latch.ui.web.replay"): "the replay page's machinery (latch.host.replay: engine, estimators, "
    "plugin host) loads when `latch web` starts its server, not with every "
    "command's plugin host (`latch --help` lists `web`)",
    ("hotpaths/__init__.py", "latch._native"): "the optional C++ extension, chosen at first use",
    ("hotpaths/__init__.py", "latch.hotpaths._py"): "the reference builds its class table at import: only when "
    "it serves (LATCH_IMPL=python or no extension)",
    ("estimators/cabi.py", "latch._native"): "the optional C++ extension",
    ("engine/__init__.py", "latch.engine.continuity"): "the continuity engine (its episode index and recall) loads "
    "when it is used, not with every import of an engine submodule (latch.engine.units, the engine SDK)",
    ("__main__.py", "latch.bench.executor"): "the bench's task server (multiprocessing) starts before the command's "
    "modules load only for a local `latch bench`; no other command imports it",
    (
        "__main__.py",
        "latch.cli.main",
    ): "the `latch` command's modules (click, rich) load after a local `latch bench` has "
    "started its task server, whose warm-up then runs beside them",
}
LOCAL_IMPORTS_MAX = 16


def _local_latch_imports() -> list[tuple[str, int, str]]:
    """``(file under src/latch, line, imported latch module)`` for every import statement inside a function."""
    found = set()
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _imports_inside_functions(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [
                    f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES or module == "latch" else module
                    for a in node.names
                ]
            rel = str(path.relative_to(SRC))
            found.update((rel, node.lineno, t) for t in targets if t == "latch" or t.startswith("latch."))
    return sorted(found)


def _imports_inside_functions(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of ``tree`` inside a function (at any depth), each once, in one walk of the tree."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, inside = todo.pop()
        if inside and isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        inside = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        todo.extend((child, inside) for child in ast.iter_child_nodes(node))
    return found


def test_function_local_latch_imports_are_few_and_each_has_its_reason():
    local = _local_latch_imports()
    unexplained = [hit for hit in local if (hit[0], hit[2]) not in LOCAL_IMPORTS_ALLOWED]
    assert unexplained == [], "import these at module level (or add them with the reason to LOCAL_IMPORTS_ALLOWED)"
    assert len({(f, line) for f, line, _ in local}) <= LOCAL_IMPORTS_MAX
    assert {(f, m) for f, _, m in local} == set(LOCAL_IMPORTS_ALLOWED), "an allowed local import no longer happens"


def test_the_architecture_map_names_every_package_and_module():
    """docs/architecture.md's map of ``src/latch`` names every subpackage and top-level module (``latch/NAME``)."""
    text = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    names = sorted(
        {p.name for p in SRC.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
        | {p.name for p in SRC.glob("*.py") if not p.name.startswith("_")}
    )
    missing = [n for n in names if f"latch/{n}" not in text]
    assert missing == [], f"docs/architecture.md does not name: {missing}"


# The layers, top to bottom: a module imports only its own layer and the ones below (docs/architecture.md).
LAYERS = [
    ("cli", ("latch.cli", "latch.default_plugins", "latch.__main__")),
    ("agent, bench, ui", ("latch.agent", "latch.bench", "latch.ui")),
    ("host", ("latch.host", "latch.plugins", "latch.hookspecs", "latch.accounting")),
    (
        "engine, kernel, importers, providers",
        ("latch.engine", "latch.kernel", "latch.importers", "latch.providers", "latch.estimators", "latch.hotpaths"),
    ),
    (
        "store, events",
        (
            "latch.store",
            "latch.events",
            "latch.port",
            "latch.config",
            "latch.textsafe",
            "latch.extras",
            "latch.count_cache",
            "latch.cache_files",
            "latch.installed",
            "latch.lazyre",
            "latch.records",
        ),
    ),
]


def _layer(module: str) -> int | None:
    for k, (_, prefixes) in enumerate(LAYERS):
        if any(_in(module, p) for p in prefixes):
            return k
    return None


def test_every_module_has_a_layer():
    assert [m for m in MODULES if m != "latch" and _layer(m) is None] == []


def test_layers_import_only_downwards():
    upward = sorted(
        f"{m} -> {t} ({LAYERS[_layer(m)][0]} imports {LAYERS[_layer(t)][0]})"
        for m, targets in IMPORTS.items()
        if _layer(m) is not None
        for t in targets
        if _layer(t) is not None and _layer(t) < _layer(m)
    )
    assert upward == []
