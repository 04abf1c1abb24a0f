"""``diagnose`` on real runs: two mock runs of different skill seeds (the candidate over a shifted problem
range, with some failing requests) diagnosed from the store and from their exported directories give the
same numbers and the same evidence."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from workbench.analysis.diagnosis import Diagnosis, diagnose, evidence_for
from workbench.analysis.diagnosis.evidence import ExportEvidence, StoreEvidence
from workbench.analysis.sources import load_run
from workbench.engine import run_evaluation
from workbench.environments import get_environment
from workbench.export.artifacts import export_run
from workbench.mock import mock_model
from workbench.model.config import ModelConfig
from workbench.solvers import SimpleSolver

pytestmark = pytest.mark.timeout(120)

PROBLEMS, REPEATS = 30, 4
BENCHMARK = "unit_conversion_mc"  # its problems have a category


def _run(store: Path, run_id: str, skill_seed: int, problems: tuple[int, int], **faults: Any) -> None:
    with mock_model(latency_ms=0, skill_seed=skill_seed, **faults) as m:
        solver = SimpleSolver(ModelConfig(url=m.base_url, model_id="nel-mock", max_retries=0))
        asyncio.run(run_evaluation(get_environment(BENCHMARK), solver, store=store, n_repeats=REPEATS,
                                   problem_range=problems, max_concurrent=16, run_id=run_id))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store with runs ``base`` (skill seed 1, problems 0..29) and ``cand`` (skill seed 2, problems 3..32,
    10 % of requests failing), each also exported into ``root/export-RUN``. Returns (store, root)."""
    root = tmp_path_factory.mktemp("diagnose")
    store = root / "nel.duckdb"
    _run(store, "base", 1, (0, PROBLEMS))
    _run(store, "cand", 2, (3, PROBLEMS + 3), fail_rate=0.1, faults=("500",))
    for run_id in ("base", "cand"):
        export_run(store, run_id, root / f"export-{run_id}")
    return store, root


def _diagnose(*sources: str, store: Path | None) -> Diagnosis:
    data = [load_run(s, store=store) for s in sources]
    evidence = [evidence_for(s, store) for s in sources]
    return diagnose(data[0], data[1], evidence_baseline=evidence[0], evidence_candidate=evidence[1], top=4)


def _numbers(value: Any) -> Any:
    """The diagnosis as plain data, without where it was read from (NaN made comparable)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _numbers({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items() if k not in ("source", "evidence")}
    if isinstance(value, list | tuple):
        return [_numbers(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


@pytest.fixture(scope="module")
def both(runs) -> tuple[Diagnosis, Diagnosis]:
    store, root = runs
    return _diagnose("base", "cand", store=store), _diagnose(str(root / "export-base"), str(root / "export-cand"),
                                                             store=None)


class TestStoreAndExportAgree:
    """The same runs read from the store and from their exports."""

    def test_every_number_and_every_piece_of_evidence_is_the_same(self, both):
        from_store, from_export = both
        assert _numbers(from_store) == _numbers(from_export)

    def test_only_the_sources_differ(self, both, runs):
        store, root = runs
        from_store, from_export = both
        assert from_store.baseline.profile.source == "store"
        assert from_export.baseline.profile.source == str(root / "export-base")
        assert [a.source for a in from_store.artifacts] == [str(store), str(store)]
        assert from_store.settings["evidence"] == ["StoreEvidence", "StoreEvidence"]
        assert from_export.settings["evidence"] == ["ExportEvidence", "ExportEvidence"]

    def test_evidence_for_follows_the_rule_of_load_run(self, runs):
        store, root = runs
        assert isinstance(evidence_for("base", store), StoreEvidence)
        assert isinstance(evidence_for(str(root / "export-base"), None), ExportEvidence)
        assert evidence_for(str(root / "export-base"), None).run_id == "base"

    def test_a_folder_that_only_shares_the_runs_name_does_not_hide_the_run(self, runs, tmp_path, monkeypatch):
        """Gym's output folder `gym/` beside a run imported as `gym`: the evidence comes from the store."""
        store, _ = runs
        monkeypatch.chdir(tmp_path)
        (tmp_path / "base").mkdir()
        assert isinstance(evidence_for("base", store), StoreEvidence)
        assert load_run("base", store=store).source.startswith("store:")


class TestTheDiagnosis:
    """What a real pair of runs gives."""

    def test_one_sided_tasks_and_the_exact_sum(self, both):
        s = both[0].shift
        assert s is not None
        assert (s.n_paired, s.only_a, s.only_b) == (PROBLEMS - 3, (0, 1, 2), (30, 31, 32))
        assert abs(math.fsum(t.contribution for t in s.tasks) - s.delta) <= 1e-12
        assert s.attempt_flips.n_pairs == (PROBLEMS - 3) * REPEATS

    def test_drivers_carry_their_evidence(self, both):
        s = both[0].shift
        assert s is not None and s.drivers_down and s.drivers_up
        for driver in (*s.drivers_down, *s.drivers_up):
            assert len(driver.dive_a.evidence) == driver.task.attempts_a
            assert len(driver.dive_b.evidence) == driver.task.attempts_b
            assert driver.representative_pass is not None and driver.representative_pass.passed
            assert driver.representative_fail is not None and not driver.representative_fail.passed
            assert driver.diff_markdown.startswith("```diff\n--- pass: ")
            assert sum(e.passed for e in driver.dive_a.evidence) == driver.task.passes_a

    def test_failed_requests_show_as_errors_with_their_message(self, both, runs):
        store, root = runs
        cand = both[0].candidate
        assert cand is not None and cand.profile.n_completed < cand.profile.n_attempts
        spot = cand.profile.error_hotspots[0]
        assert spot.categories[0] == "server_error"
        from_store = evidence_for("cand", store).attempts([spot.task_idx])[spot.task_idx]
        from_export = evidence_for(str(root / "export-cand"), None).attempts([spot.task_idx])[spot.task_idx]
        assert from_store == from_export
        errored = [e for e in from_store if e.failure_category == "server_error"]
        assert len(errored) == spot.n_errors and all(e.error for e in errored)

    def test_dives_and_response_lengths(self, both):
        base = both[0].baseline
        assert base.sometimes and all(0 < t.passes < t.attempts for t in base.sometimes)
        assert all(t.passes == 0 for t in base.never)
        rates = [abs(t.passes / t.attempts - 0.5) for t in base.sometimes]
        assert rates == sorted(rates)
        chars = next(c for c in base.profile.cost if c.measure == "response_chars" and c.column is None)
        assert chars.n_pass > 0 and chars.pass_mean > 0
        assert base.profile.slice_columns[0] == "category"
