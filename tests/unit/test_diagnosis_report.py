"""The diagnosis report: BLADE's ten sections in order, every claim citing task ids and counts, the heuristic
label on every recommendation, data escaped, and JSON that round-trips."""

from __future__ import annotations

import json
import math
import re

import orjson
from test_diagnosis_findings import (
    evidence_for,
    make_dive,
    make_profile,
    make_run,
    make_shift,
    steady,
    task_shift,
)

import workbench
from workbench.analysis.diagnosis.findings import run_findings, shift_findings
from workbench.analysis.diagnosis.report import (
    HEURISTIC,
    NO_SECOND_RUN,
    SECTIONS,
    diagnosis_json,
    render_markdown,
    rerun_command,
)
from workbench.analysis.diagnosis.types import (
    Artifact,
    CostContrast,
    Diagnosis,
    FailureCount,
    RunDiagnosis,
)


def single() -> Diagnosis:
    """One run with sometimes- and never-pass tasks and findings."""
    p = make_profile(
        pass_at_1=0.7, pass_at_k=0.9, retry_value=0.2, consistency=0.6, source="results/run-a",
        buckets={"always": tuple(range(12)), "sometimes": tuple(range(12, 18)), "never": (18, 19), "missing": ()},
        failures=(FailureCount("wrong", 10, 0.8, 6), FailureCount("format_error", 3, 0.2, 2)),
        cost=(CostContrast("total_tokens", None, None, 50, 13, 120.0, 300.0, 110.0, float("nan")),),
    )
    sometimes = tuple(make_dive(i, [("42", True), ("41", False), ("42", True), (None, False)],
                                category="format_error") for i in (12, 13))
    never = (make_dive(18, [("17", False)] * 4), make_dive(19, [("1", False), ("2", False)] * 2))
    run = make_run(p, sometimes=sometimes, never=never)
    return Diagnosis(baseline=run, candidate=None, shift=None, findings=run_findings(run),
                     artifacts=(Artifact("run-a", "results/run-a", 20, 80),),
                     settings={"metric": "correct", "slices": ["category"], "top": 5})


def pair() -> Diagnosis:
    down = [task_shift(i, 4, 0) for i in (17, 18, 19)]
    pb = make_profile(run_id="run-b", failures=(FailureCount("format_error", 12, 1.0, 3),), pass_at_1=0.85)
    s = make_shift(steady(17) + down, profile_b=pb, drivers_down=tuple(evidence_for(t, "format_error") for t in down))
    a = RunDiagnosis(s.profile_a, (), ())
    b = RunDiagnosis(pb, (), tuple(e.dive_b for e in s.drivers_down))
    return Diagnosis(baseline=a, candidate=b, shift=s, findings=run_findings(b) + shift_findings(s),
                     artifacts=tuple(Artifact(r, "/tmp/nel.duckdb", 20, 80) for r in ("run-a", "run-b")),
                     settings={"metric": "correct", "slices": None, "top": 3})


def headings(md: str) -> list[str]:
    return re.findall(r"^## \d+\. (.+)$", md, flags=re.M)


def section(md: str, name: str) -> str:
    n = SECTIONS.index(name) + 1
    return md.split(f"## {n}. {name}\n", 1)[1].split("\n## ", 1)[0]


def test_the_ten_sections_come_in_blades_order() -> None:
    assert len(SECTIONS) == 10
    assert headings(render_markdown(single())) == list(SECTIONS)
    assert headings(render_markdown(pair())) == list(SECTIONS)


def test_a_single_run_says_there_is_no_second_run() -> None:
    assert NO_SECOND_RUN in section(render_markdown(single()), "Cross-run comparison")


def test_buckets_and_deep_dives_cite_task_ids_and_counts() -> None:
    md = render_markdown(single())
    buckets = section(md, "Task outcome buckets")
    assert "| sometimes | 6 | 30.0% | 6 tasks: #12, #13, #14, #15, #16, #17 |" in buckets
    assert "| never | 2 | 10.0% | 2 tasks: #18, #19 |" in buckets
    assert "### #12 in `run-a`: 2 of 4 attempts passed" in section(md, "Sometimes-pass deep dives")
    never = section(md, "Never-pass deep dives")
    assert "2 never-pass tasks; 2 read closely" in never and "Every one of the 4 attempts answered 17" in never
    failures = section(md, "Dominant failure modes")
    assert "| format_error | 3 | 20.0% | 2 | 2 tasks: #12, #13 |" in failures


def test_every_recommendation_is_labelled_heuristic_with_its_rule() -> None:
    d = single()
    recs = section(render_markdown(d), "Recommendations")
    assert d.findings
    for f in d.findings:
        assert HEURISTIC.format(rule=f.rule) in recs
    assert "Unreliable knowledge" in recs and "Tasks cited: 6 tasks: #12" in recs


def test_no_finding_is_said_plainly() -> None:
    run = make_run()
    d = Diagnosis(run, None, None, (), (Artifact("run-a", "store", 20, 80),), {})
    md = render_markdown(d)
    assert "No rule fired" in section(md, "Recommendations") and "No heuristic rule fired" in md


def test_the_comparison_shows_the_shift_its_drivers_and_transitions() -> None:
    md = render_markdown(pair())
    cross = section(md, "Cross-run comparison")
    assert "Δ = -0.1500" in cross and "add up to -0.1500" in cross
    assert "| always | 17 | 0 | 3 | 0 |" in cross
    assert "| #17 | `t0017` | 4/4 (always) | 0/4 (never) | -0.0500 | 0 → 0 |" in cross
    summary = section(md, "Executive summary")
    assert "Fell: 3 tasks: #17, #18, #19" in summary and "Δpass@1 (candidate − baseline) = -0.1500" in summary
    assert "shift.format_error_spike" in section(md, "Recommendations")


def test_the_comparison_says_what_moved_the_score_by_transition() -> None:
    cross = section(render_markdown(pair()), "Cross-run comparison")
    assert "the groups add up to Δ = -15.00 pp" in cross and "then the smallest Fisher exact p-value" in cross
    assert "| always→never | 3 | -15.00 pp |" in cross and "| #17, #18, #19 |" in cross
    assert "| always→always | 17 | 0.00 pp |" in cross


def test_reproducibility_names_the_version_and_the_command() -> None:
    md = render_markdown(pair())
    notes = section(md, "Reproducibility notes")
    assert f"workbench version {workbench.__version__}" in notes
    assert "nel diagnose run-a run-b --metric correct --top 3 --store /tmp/nel.duckdb" in notes
    assert rerun_command(single()) == "nel diagnose results/run-a --metric correct --slice category --top 5"
    assert "nel diagnose X" in render_markdown(single(), command="nel diagnose X")


def test_text_from_data_cannot_break_the_markdown() -> None:
    d = single()
    dive = make_dive(12, [("a|b <script>", True), ("```", False)])
    d = Diagnosis(RunDiagnosis(d.baseline.profile, (dive,), ()), None, None, (), d.artifacts, {})
    md = render_markdown(d)
    outside_fences = re.sub(r"(`{3,})text\n.*?\n\1\n", "", md, flags=re.S)
    assert "<script>" not in outside_fences and "a\\|b &lt;script&gt;" in md
    assert "````text\nThe answer is ```.\n````" in md  # a fence longer than the response's own backticks
    assert headings(md) == list(SECTIONS)


def test_json_is_native_and_round_trips() -> None:
    data = diagnosis_json(pair())
    assert data == json.loads(json.dumps(data)) == orjson.loads(orjson.dumps(data))
    assert data["shift"]["transitions"]["always→never"] == 3
    assert data["sections"] == list(SECTIONS) and data["version"] == workbench.__version__
    assert isinstance(data["findings"], list) and data["findings"][0]["task_idx"] == [17, 18, 19]
    nan = diagnosis_json(single())["baseline"]["profile"]["cost"][0]["fail_median"]
    assert nan is None and not any(isinstance(v, float) and math.isnan(v) for v in _leaves(data))


def _leaves(x: object) -> list[object]:
    if isinstance(x, dict):
        return [v for y in x.values() for v in _leaves(y)]
    if isinstance(x, list):
        return [v for y in x for v in _leaves(y)]
    return [x]
