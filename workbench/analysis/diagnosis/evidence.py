"""Where the texts behind a diagnosis come from, and the close read of one task built from them.

The numbers of a diagnosis come from ``RunData`` frames; the evidence a reader checks a claim against (the
responses, the extracted answers) lives in the store's ``steps`` or in an export's ``results.jsonl`` /
``trajectories.jsonl``. An ``EvidenceSource`` fetches it for a handful of tasks at a time, in one query, so
a diagnosis never pulls a whole run's responses into Python.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from workbench.analysis.diagnosis.types import AnswerCount, AttemptEvidence, TaskDive
from workbench.analysis.sources import RunData
from workbench.analysis.triage.diff import word_diff
from workbench.errors import UsageError
from workbench.store import Store, open_store
from workbench.store.queries.evidence import ExportEvidenceRows, StoreEvidenceRows
from workbench.store.queries.exported import RESULTS, TRAJECTORIES, bundle_path, read_bundle

DIFF_INPUT_CHARS = 20_000  # each response is clipped to this before its lines are aligned
DIFF_LINES = 40  # lines of the rendered diff, context included
DIFF_LINE_CHARS = 200


class EvidenceSource(Protocol):
    """The attempt texts of one run."""

    @property
    def run_id(self) -> str: ...

    def attempts(self, task_idx: Sequence[int]) -> dict[int, list[AttemptEvidence]]:
        """Every attempt of each task asked for, repeat ascending (a task without attempts is left out)."""
        ...

    def answer_agreement(self, task_idx: Sequence[int]) -> dict[int, int]:
        """For each task, how many of its attempts gave its most common extracted answer (attempts without
        one not counted): how firmly a never-pass task's attempts agree on one wrong answer."""
        ...


def evidence_for(source: str, store: Path | None, *, metric: str | None = None) -> EvidenceSource:
    """The evidence of ``source``, read by the rule of ``load_run``: a directory holding one exported
    ``eval-*.json`` (or that file), else a run id in ``store``. ``metric`` picks the metric whose verdict and
    extracted answer are shown (default: the run's primary).

    Raises:
        UsageError: no such directory and no store to look the run up in.
    """
    path = Path(source)
    # A folder that merely shares the run's name (Gym's output folder `gym/` beside a run imported as `gym`) holds
    # no export, and must not hide the run in the store, as in `load_run`.
    if path.is_file() or (path.is_dir() and (store is None or any(path.glob("eval-*.json")))):
        return ExportEvidence(path, metric=metric)
    if store is None:
        raise UsageError(f"{source}: no such directory, and no store given to look up a run in")
    return StoreEvidence(open_store(store), source, metric=metric)


def _evidence(run_id: str, rows: list[tuple[Any, ...]]) -> dict[int, list[AttemptEvidence]]:
    out: dict[int, list[AttemptEvidence]] = {}
    for idx, rep, passed, answer, expected, category, error, response in rows:
        out.setdefault(int(idx), []).append(AttemptEvidence(
            run_id=run_id, task_idx=int(idx), repeat=int(rep), passed=bool(passed), extracted_answer=answer,
            expected_answer=expected, failure_category=category, error=error, response=response or ""))
    return out


class StoreEvidence:
    """A run's attempts in a store, live segments included (the rows: ``workbench.store.queries.evidence``)."""

    def __init__(self, store: Store, run_id: str, *, metric: str | None = None) -> None:
        self.store = store
        self._run_id = run_id
        self.metric = metric
        self._rows = StoreEvidenceRows(store, run_id, metric)

    @property
    def run_id(self) -> str:
        return self._run_id

    def attempts(self, task_idx: Sequence[int]) -> dict[int, list[AttemptEvidence]]:
        if not task_idx:
            return {}
        return _evidence(self.run_id, self._rows.attempt_rows(task_idx))

    def answer_agreement(self, task_idx: Sequence[int]) -> dict[int, int]:
        if not task_idx:
            return {}
        return {int(i): int(n) for i, n in self._rows.agreement_rows(task_idx)}


class ExportEvidence:
    """A run's attempts in an exported directory: ``results.jsonl`` (answers, verdicts, responses) and, when it
    is there, ``trajectories.jsonl`` (the transport error). DuckDB streams the files; only the tasks asked for
    become Python objects."""

    def __init__(self, path: Path, *, metric: str | None = None) -> None:
        bundle = bundle_path(path)
        self.folder = bundle.parent
        self._run_id = str(read_bundle(bundle)["run_id"])
        self.results = self.folder / RESULTS
        trajectories = self.folder / TRAJECTORIES
        self.trajectories = trajectories if trajectories.is_file() else None
        self.metric = metric
        self._rows = ExportEvidenceRows(self.folder, self.results, self.trajectories, metric)

    @property
    def run_id(self) -> str:
        return self._run_id

    def attempts(self, task_idx: Sequence[int]) -> dict[int, list[AttemptEvidence]]:
        if not task_idx:
            return {}
        return _evidence(self.run_id, self._rows.attempt_rows(task_idx))

    def answer_agreement(self, task_idx: Sequence[int]) -> dict[int, int]:
        if not task_idx:
            return {}
        return {int(i): int(n) for i, n in self._rows.agreement_rows(task_idx)}


class CachedEvidence:
    """An evidence source that keeps what it fetched, so that the dives and the drivers of one run cost one
    query: ``prefetch`` every task needed, then ``attempts`` answers from memory."""

    def __init__(self, source: EvidenceSource) -> None:
        self.source = source
        self._cache: dict[int, list[AttemptEvidence]] = {}

    @property
    def run_id(self) -> str:
        return self.source.run_id

    def prefetch(self, task_idx: Sequence[int]) -> None:
        missing = sorted({int(i) for i in task_idx} - self._cache.keys())
        if missing:
            fetched = self.source.attempts(missing)
            self._cache.update({i: fetched.get(i, []) for i in missing})

    def attempts(self, task_idx: Sequence[int]) -> dict[int, list[AttemptEvidence]]:
        self.prefetch(task_idx)
        return {int(i): self._cache[int(i)] for i in task_idx if self._cache[int(i)]}

    def answer_agreement(self, task_idx: Sequence[int]) -> dict[int, int]:
        return self.source.answer_agreement(task_idx)


# ---- one task, read closely ------------------------------------------------------------------------
def build_dive(
    run_id: str,
    task_id: str,
    task_idx: int,
    passes: int,
    attempts: int,
    evidence: Sequence[AttemptEvidence],
    verdicts: Mapping[int, bool] | None = None,
) -> TaskDive:
    """The close read of one task: ``passes`` / ``attempts`` are the run's counts (the frames'), ``evidence``
    its attempt texts (empty without an evidence source), and ``verdicts`` each repeat's pass/fail under the
    diagnosed metric, which overrides the evidence's so a dive always agrees with the numbers."""
    ev = [_with_verdict(e, verdicts) for e in sorted(evidence, key=lambda e: e.repeat)]
    rep_pass = representative_pass(ev)
    rep_fail = representative_fail(ev)
    return TaskDive(
        run_id=run_id, task_id=task_id, task_idx=task_idx, passes=passes, attempts=attempts,
        expected_answer=next((e.expected_answer for e in ev if e.expected_answer is not None), None),
        answers=answer_counts(ev), evidence=tuple(ev), representative_pass=rep_pass, representative_fail=rep_fail,
        diff_markdown=diff_markdown(rep_pass, rep_fail),
    )


def _with_verdict(e: AttemptEvidence, verdicts: Mapping[int, bool] | None) -> AttemptEvidence:
    if verdicts is None or e.repeat not in verdicts or verdicts[e.repeat] == e.passed:
        return e
    return AttemptEvidence(run_id=e.run_id, task_idx=e.task_idx, repeat=e.repeat, passed=verdicts[e.repeat],
                           extracted_answer=e.extracted_answer, expected_answer=e.expected_answer,
                           failure_category=e.failure_category, error=e.error, response=e.response)


def answer_counts(evidence: Sequence[AttemptEvidence]) -> tuple[AnswerCount, ...]:
    """Distinct (extracted answer, verdict) pairs, most frequent first; ties: passing first, then the answer
    (no answer last). An answer that both passed and failed (a judge, say) appears once per verdict."""
    counts = Counter((e.extracted_answer, e.passed) for e in evidence)
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], not kv[0][1], kv[0][0] is None, kv[0][0] or ""))
    return tuple(AnswerCount(answer=a, n_attempts=n, passed=p) for (a, p), n in ordered)


def representative_pass(evidence: Sequence[AttemptEvidence]) -> AttemptEvidence | None:
    """The first passing attempt (lowest repeat)."""
    return next((e for e in sorted(evidence, key=lambda e: e.repeat) if e.passed), None)


def representative_fail(evidence: Sequence[AttemptEvidence]) -> AttemptEvidence | None:
    """The first attempt (lowest repeat) giving the most common wrong answer. Failures that came back with a
    response are preferred: a transport error has nothing to diff. Among equally common answers, the one seen
    first wins."""
    failed = sorted((e for e in evidence if not e.passed), key=lambda e: e.repeat)
    answered = [e for e in failed if e.response.strip()]
    pool = answered or failed
    if not pool:
        return None
    counts = Counter(e.extracted_answer for e in pool)
    top = max(counts.values())
    return next(e for e in pool if counts[e.extracted_answer] == top)


def diff_markdown(passing: AttemptEvidence | None, failing: AttemptEvidence | None) -> str:
    """A word diff of a passing and a failing response as a fenced ``diff`` block: ``-`` lines are the pass's,
    ``+`` lines the fail's, changed words marked ``[-…-]`` / ``{+…+}``; unchanged stretches are cut to one line
    of context, long lines and long diffs clipped. "" without both attempts.

    Lines are aligned first and only the changed line pairs are diffed word by word (``word_diff`` on one
    line each), stopping once ``DIFF_LINES`` lines are written: a word diff of two long responses at once is
    quadratic in their repeated tokens (seconds for a few pages), and a report shows only the start anyway.
    """
    if passing is None or failing is None:
        return ""
    a_lines = [_clip(line) for line in passing.response[:DIFF_INPUT_CHARS].split("\n")]
    b_lines = [_clip(line) for line in failing.response[:DIFF_INPUT_CHARS].split("\n")]
    body: list[str] = []
    opcodes = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False).get_opcodes()
    changed = [op for op in opcodes if op[0] != "equal"]
    last = -1  # the last line of ``a`` written, to know when a gap (``@@``) is needed
    for n, (_, i1, i2, j1, j2) in enumerate(changed):
        if len(body) >= DIFF_LINES:
            break
        if max(i1 - 1, 0) > last + 1:  # unchanged lines skipped
            body.append("@@")
        if i1 > 0 and i1 - 1 > last:
            body.append(" " + a_lines[i1 - 1])
        body += _changed_lines(a_lines[i1:i2], b_lines[j1:j2])
        last = i2 - 1
        following = changed[n + 1][1] if n + 1 < len(changed) else len(a_lines)
        if i2 < following:
            body.append(" " + a_lines[i2])
            last = i2
    if not changed:
        body.append(" (the two responses are identical)")
    if len(body) > DIFF_LINES:
        body = [*body[:DIFF_LINES], "@@ … the rest of the diff is not shown"]
    if max(len(passing.response), len(failing.response)) > DIFF_INPUT_CHARS:
        body.append(f"@@ responses clipped to their first {DIFF_INPUT_CHARS:,} characters")
    head = [f"--- pass: {_label(passing)}", f"+++ fail: {_label(failing)}"]
    return "```diff\n" + "\n".join([*head, *body]) + "\n```"


def _changed_lines(a: list[str], b: list[str]) -> list[str]:
    """A replaced block: its lines paired in order, each pair diffed word by word; the rest removed / added."""
    removed: list[str] = []
    added: list[str] = []
    for k in range(max(len(a), len(b))):
        if k < len(a) and k < len(b):
            rows = word_diff(a[k], b[k]).rows
            removed.append("-" + "".join(f"[-{s.text}-]" if s.kind == "removed" else s.text for s in rows[0].left))
            added.append("+" + "".join(f"{{+{s.text}+}}" if s.kind == "added" else s.text for s in rows[0].right))
        elif k < len(a):
            removed.append(f"-[-{a[k]}-]" if a[k] else "-")
        else:
            added.append(f"+{{+{b[k]}+}}" if b[k] else "+")
    return [*removed, *added]


def _label(e: AttemptEvidence) -> str:
    answer = "no answer" if e.extracted_answer is None else f"answer {_clip(e.extracted_answer, 60)!r}"
    return f"{e.run_id} #{e.task_idx} attempt {e.repeat} ({answer})"


def _clip(text: str, limit: int = DIFF_LINE_CHARS) -> str:
    text = text.replace("\r", "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_dives(run: RunData, evidence: EvidenceSource | None, task_idx: Sequence[int]) -> dict[int, TaskDive]:
    """Dives of several tasks of ``run`` (attempted ones; others are left out), their texts fetched in one
    call; without ``evidence`` the dives carry the counts only."""
    wanted = sorted({int(i) for i in task_idx})
    if not wanted:
        return {}
    tasks = run.tasks.filter(pl.col("task_idx").is_in(wanted) & (pl.col("n") > 0))
    verdicts: dict[int, dict[int, bool]] = {}
    for idx, rep, passed in run.attempts.filter(pl.col("task_idx").is_in(wanted)).select(
            "task_idx", "repeat", pl.col("passed").fill_null(False)).iter_rows():
        verdicts.setdefault(int(idx), {})[int(rep)] = bool(passed)
    texts = evidence.attempts(wanted) if evidence is not None else {}
    return {int(idx): build_dive(run.run_id, str(tid or ""), int(idx), int(n_pass), int(n), texts.get(int(idx), ()),
                                 verdicts.get(int(idx)))
            for tid, idx, n, n_pass in tasks.select("task_id", "task_idx", "n", "n_pass").iter_rows()}
