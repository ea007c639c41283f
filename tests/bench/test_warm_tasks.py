"""Bench and stress task processes start warm (forked from a server that loaded what every job needs), and the
price table loads offline without genai-prices' network dependency ``httpx2``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from corpus_support import REPO

from latch.bench import executor

pytestmark = pytest.mark.slow  # task servers and CLI subprocesses

EXAMPLES = REPO / "examples"


def _loaded_in_task() -> dict:
    """Run in a task process: what it found loaded before doing anything."""
    from latch import plugins
    from latch.accounting import pricing
    from latch.bench import runner

    return {
        "store_template": runner._store_template is not None,
        "numpy": "numpy" in sys.modules,
        "genai_prices": "genai_prices.data" in sys.modules,
        "prices": pricing._snapshot.cache_info().currsize == 1,
        "plugins": plugins._MANAGER is not None,
        "deferred": _deferred_left(),
        "pid": os.getpid(),
    }


def _deferred_left() -> list[str]:
    """The module-level regular expressions and data class ``__init__`` methods of the loaded ``latch`` modules still
    left to their first use."""
    from latch import lazyre, records

    left = []
    for name, module in list(sys.modules.items()):
        if name.startswith("latch") and module is not None:
            namespace = vars(module)
            left += [f"{name}.{key}" for key in lazyre.pending(namespace)]
            left += [f"{name}.{key}.__init__" for key in records.pending_inits(namespace, name)]
    return left


def test_task_processes_start_with_numpy_prices_plugins_and_compiled_patterns_loaded():
    rows = executor.run_tasks(_loaded_in_task, [({"task": i}, ()) for i in range(2)], jobs=1)
    assert [{k: v for k, v in r.items() if k != "pid"} for r in rows] == [
        {"store_template": True, "numpy": True, "genai_prices": True, "prices": True, "plugins": True, "deferred": []}
    ] * 2
    assert rows[0]["pid"] != rows[1]["pid"] != os.getpid()  # still a fresh process per task


def test_warm_up_loads_everything_and_reports_what_failed(monkeypatch):
    from latch.bench import warm

    assert warm.warm_up() == []
    monkeypatch.setattr(warm, "WARM_MODULES", ("latch.no_such_module",))
    (failed,) = warm.warm_up()  # never raises: the tasks only start colder
    assert failed.startswith("latch.no_such_module: ModuleNotFoundError:")


@pytest.fixture
def without_httpx2(tmp_path):
    """The environment of a process (and of every process it starts) where ``import httpx2`` fails as if it were
    not installed: a folder first on ``PYTHONPATH`` whose ``httpx2`` raises ``ModuleNotFoundError``."""
    shadow = tmp_path / "shadow" / "httpx2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'httpx2'\", name='httpx2')\n", encoding="utf-8"
    )
    path = os.pathsep.join(p for p in (str(shadow.parent), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "LATCH_HOME": str(tmp_path / "home")}


def test_prices_load_without_httpx2(without_httpx2):
    code = textwrap.dedent("""
        import sys
        from decimal import Decimal
        try:
            import httpx2
        except ModuleNotFoundError:
            print("no-httpx2")
        from latch.accounting import pricing
        print(pricing.price(model="gpt-4.1", uncached=1_000_000).usd == Decimal("2"))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=without_httpx2, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["no-httpx2", "True"]


def test_prices_load_without_the_network_updater_and_the_package_stays_whole():
    code = textwrap.dedent("""
        import sys
        from decimal import Decimal
        from latch.accounting import pricing
        pricing.warm_up()
        print(pricing.price(model="gpt-4.1", uncached=1_000_000).usd == Decimal("2"))
        print(sorted(m for m in ("httpx2", "asyncio", "genai_prices.update_prices") if m in sys.modules))
        import genai_prices
        from genai_prices import UpdatePrices, Usage, calc_price
        print(genai_prices.__version__ == pricing.installed.version("genai-prices"), UpdatePrices.__name__)
        print(calc_price(Usage(input_tokens=1_000_000), "gpt-4.1").total_price == Decimal("2"))
        print(hasattr(genai_prices, "no_such_name"))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["True", "[]", "True UpdatePrices", "True", "False"]


def test_prices_after_the_whole_package_was_imported():
    code = textwrap.dedent("""
        from decimal import Decimal
        import genai_prices
        from latch.accounting import pricing
        print(pricing.price(model="gpt-4.1", uncached=1_000_000).usd == Decimal("2"), callable(genai_prices.calc_price))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True"]


def test_latch_bench_runs_without_httpx2(tmp_path, without_httpx2):
    out = tmp_path / "out"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "latch.cli",
            "bench",
            "--engines",
            "continuity",
            "--examples",
            str(EXAMPLES),
            "--scenario-events",
            "0",
            "--budgets",
            "32k:4k:8k",
            "--out",
            str(out),
            "--jobs",
            "1",
        ],
        capture_output=True,
        text=True,
        env=without_httpx2,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads((out / "report.json").read_text())
    assert doc["jobs"] and not any("error" in j for j in doc["jobs"])
    assert all(j["cost_usd"] is not None and j["cost_usd"] > 0 for j in doc["jobs"])


def test_a_store_from_a_template_is_a_copy_and_a_jobs_row_is_the_same_with_it(monkeypatch):
    """A job's in-memory store is a copy of a migrated empty one (its migrations not run again): what the template
    holds is there, and a job's row is the same as on a store migrated afresh (timings and memory aside)."""
    from latch.bench import runner
    from latch.bench.runner import SessionSource, parse_budgets, run_job
    from latch.store import EventStore

    fresh = EventStore(":memory:")
    fresh._db.execute("CREATE TABLE copied_marker (x)")
    template = fresh.serialize()
    copy = EventStore(":memory:", template=template)
    assert copy.applied_migrations() == fresh.applied_migrations()
    assert copy._db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'copied_marker'").fetchone() == (1,)
    assert {r[0] for r in copy._db.execute("SELECT sql FROM sqlite_master")} == {
        r[0] for r in fresh._db.execute("SELECT sql FROM sqlite_master")
    }
    copy.close()
    fresh.close()

    def stable(row: dict) -> dict:
        return {k: v for k, v in row.items() if not k.endswith(("_ms", "_mb", "seconds")) and "rss" not in k}

    source = SessionSource(name="invoice", path=str(EXAMPLES / "invoice-rounding.claude.jsonl"))
    budget = parse_budgets("32k:4k:8k")[0]
    monkeypatch.setattr(runner, "_store_template", None)
    migrated = run_job("continuity", source, budget)  # makes the template, on a store migrated afresh
    assert runner._store_template is not None
    assert stable(run_job("continuity", source, budget)) == stable(migrated)  # on a copy of the template
