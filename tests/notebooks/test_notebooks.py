"""``notebooks/explore.ipynb`` and ``notebooks/diagnose.ipynb`` run top to bottom against a store built here,
print the numbers the analysis computes, and keep static images of their charts."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import nbformat
import pytest
from conftest import BASELINE, CANDIDATE, execute

from workbench.analysis.diagnosis.api import diagnose
from workbench.analysis.sources import load_run
from workbench.analysis.triage import runs_table
from workbench.store import open_store

pytestmark = pytest.mark.timeout(180)


def images(nb: nbformat.NotebookNode) -> list[str]:
    """The MIME types of every image the executed notebook keeps."""
    return [m for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            for m in o.get("data", {}) if m.startswith("image/")]


def widget_views(nb: nbformat.NotebookNode) -> int:
    return sum("application/vnd.jupyter.widget-view+json" in o.get("data", {})
               for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def inline_svgs(nb: nbformat.NotebookNode) -> int:
    """Outputs whose ``text/html`` draws a chart as inline SVG: what ``jupyter nbconvert --to html`` shows."""
    return sum("<svg" in o.get("data", {}).get("text/html", "") for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []))


def expected_shift(store: Path):
    return diagnose(load_run(BASELINE, store=store), load_run(CANDIDATE, store=store)).shift


@pytest.fixture(scope="module")
def diagnosed(kernel_specs, store, tmp_path_factory):
    """diagnose.ipynb executed once against the test store."""
    return execute(kernel_specs, "diagnose.ipynb", tmp_path_factory.mktemp("diagnose"), NEL_STORE=str(store))


class TestDiagnoseNotebook:
    """diagnose.ipynb: two mock runs with different skill profiles, diagnosed end to end."""

    def test_prints_the_diagnosis_of_the_two_runs(self, diagnosed, store):
        nb, keys, text = diagnosed
        s = expected_shift(store)
        assert f"{BASELINE}: already in the store" in text
        assert int(keys["n_paired"]) == s.n_paired == 30
        assert keys["pass_at_1_a"] == f"{s.pass_at_1_a:.4f}"
        assert keys["pass_at_1_b"] == f"{s.pass_at_1_b:.4f}"
        assert keys["delta_pass_at_1"] == f"{s.delta:+.4f}"
        assert keys["contributions_sum"] == keys["delta_pass_at_1"]
        assert keys["pass_to_fail"] == str(s.attempt_flips.pass_to_fail)
        assert keys["drivers_down"] == ",".join(str(e.task.task_idx_b) for e in s.drivers_down)
        assert keys["drivers_up"] == ",".join(str(e.task.task_idx_b) for e in s.drivers_up)
        if s.drivers_down:
            assert keys["task"] == str(s.drivers_down[0].task.task_idx_b)
        assert "Attempts in A" in "".join(o.get("data", {}).get("text/html", "") for c in nb.cells
                                          for o in c.get("outputs", []))

    def test_keeps_a_static_image_of_every_chart_and_widget(self, diagnosed):
        nb, _, _ = diagnosed
        assert widget_views(nb) == 5  # ScoreShift, two RunOverviews, two charts (altair's JupyterChart)
        found = images(nb)
        assert found.count("image/png") >= 5  # the three widgets and two charts
        assert "image/svg+xml" in found
        assert inline_svgs(nb) == 5

    def test_its_charts_carry_their_javascript(self, diagnosed):
        """No chart imports vega-embed from a CDN: each widget's module is in its saved state."""
        nb, _, _ = diagnosed
        state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
        modules = [m["state"]["_esm"] for m in state.values() if "_esm" in m["state"]]
        assert len(modules) >= 11  # the ScoreShift's 3 or 4 charts, 3 per RunOverview, the two charts
        assert not any("esm.sh" in m or "import vegaEmbed from \"https:" in m for m in modules)

    def test_makes_its_own_runs_when_the_store_lacks_them(self, kernel_specs, tmp_path):
        store = tmp_path / "fresh" / "nel.duckdb"
        _, keys, text = execute(kernel_specs, "diagnose.ipynb", tmp_path, NEL_STORE=str(store), NEL_PROBLEMS="12",
                                NEL_REPEATS="2")
        assert f"{BASELINE}: complete, 24 steps written" in text
        assert f"{CANDIDATE}: complete, 24 steps written" in text
        s = expected_shift(store)
        assert int(keys["n_paired"]) == s.n_paired == 12
        assert keys["delta_pass_at_1"] == f"{s.delta:+.4f}"


class TestExploreNotebook:
    """explore.ipynb: SQL and polars over the store, plots, the run picker and overview."""

    def test_prints_every_run_with_its_pass_at_1(self, kernel_specs, store, tmp_path):
        nb, _, text = execute(kernel_specs, "explore.ipynb", tmp_path, NEL_STORE=str(store))
        rows = runs_table(open_store(store))
        assert {r.run_id for r in rows} == {BASELINE, CANDIDATE}
        for r in rows:
            assert r.pass_at_1 is not None
            assert f"run={r.run_id} pass_at_1={r.pass_at_1:.4f} n_steps={r.n_steps} " in text
        newest = rows[0]  # the picker's default, and so the overview's run
        profile = diagnose(load_run(newest.run_id, store=store)).baseline.profile
        assert f"overview run={newest.run_id} pass_at_1={profile.pass_at_1:.4f}" in text
        assert math.isclose(profile.pass_at_1, newest.pass_at_1, abs_tol=1e-9)  # type: ignore[arg-type]
        assert widget_views(nb) == 4  # the picker, two plots, the overview
        assert images(nb).count("image/png") >= 3  # two plots and the overview
        assert inline_svgs(nb) == 3  # two plots and the overview (the picker's table is HTML, no chart)

    @pytest.mark.parametrize("clean", [(BASELINE,), (BASELINE, CANDIDATE)], ids=["one run", "every run"])
    def test_the_failure_chart_is_a_sentence_for_runs_without_failures(self, kernel_specs, store, tmp_path, clean):
        """A run with no failure category is named, not an empty panel; with none in any run, no chart is drawn."""
        from workbench.store.database import connect_rw

        copy = tmp_path / "nel.duckdb"
        shutil.copy(store, copy)
        con = connect_rw(copy)
        try:
            con.execute(f"UPDATE steps SET failure_category = NULL WHERE run_id IN ({', '.join('?' for _ in clean)})",
                        list(clean))
        finally:
            con.close()
        nb, _, _ = execute(kernel_specs, "explore.ipynb", tmp_path, NEL_STORE=str(copy))
        (cell,) = [c for c in nb.cells if c.cell_type == "code" and "FROM failure_counts" in c.source]
        printed = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
        charts = [o for o in cell.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
                  or any(m.startswith("image/") for m in o.get("data", {}))]
        assert f"No failure category in {', '.join(sorted(clean))}" in printed
        assert len(charts) == (len(clean) < 2), "a chart of the runs that failed, none when no run did"

    def test_opened_from_notebooks_it_finds_the_store_make_demo_wrote_in_the_checkout(self, kernel_specs, store,
                                                                                      tmp_path, monkeypatch):
        """JupyterLab runs a notebook's kernel in ``notebooks/``; ``make demo`` wrote ``nel-demo/`` one level up."""
        (tmp_path / "nel-demo").mkdir()
        shutil.copy(store, tmp_path / "nel-demo" / "nel.duckdb")
        (tmp_path / "notebooks").mkdir()
        monkeypatch.delenv("NEL_STORE", raising=False)
        _, _, text = execute(kernel_specs, "explore.ipynb", tmp_path / "notebooks")
        assert f"store={tmp_path / 'nel-demo' / 'nel.duckdb'}" in text
        assert f"run={BASELINE} pass_at_1=" in text
