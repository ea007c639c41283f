"""``latch stress`` materializes with the garbage collector set for a long run (:func:`latch.cli.stress.run_collector`)
and gives the process its collector back as it was."""

from __future__ import annotations

import gc

import pytest
from click.testing import CliRunner

from latch.cli import _load_commands, cli
from latch.cli import stress as stress_cli


def test_the_run_materializes_with_the_run_thresholds_and_the_loaded_objects_frozen(monkeypatch):
    _load_commands()
    seen = []
    real = stress_cli.run_stress

    def watched(cfg, progress=None):
        seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return real(cfg, progress=progress)

    monkeypatch.setattr(stress_cli, "run_stress", watched)
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    res = CliRunner().invoke(cli, ["stress", "--events", "400", "--every", "200", "--inline"])
    assert res.exit_code == 0, res.output
    assert len(seen) == 1
    assert seen[0][0] == stress_cli.RUN_GC_THRESHOLDS == (50_000, 10, 10)
    assert seen[0][1] > frozen
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen


def test_the_collector_is_restored_when_the_run_raises():
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with pytest.raises(RuntimeError, match="boom"), stress_cli.run_collector((12_345, 6, 7)):
        assert gc.get_threshold() == (12_345, 6, 7)
        raise RuntimeError("boom")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen
