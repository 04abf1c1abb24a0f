"""An lm-evaluation-harness ``generate_until`` task as a nel benchmark: lm-eval's prompts, filters and metrics,
nel's model call.

lm-eval builds every request exactly as its ``local-chat-completions`` model with ``apply_chat_template=True``
sends it (``Task.build_all_requests`` with the same chat template: the history as JSON), and again without the
chat template for the completions protocol (``local-completions``' plain context). nel sends them, with the
task's ``generation_kwargs`` mapped as lm-eval maps them (``until`` → ``stop``, first four;
``max_gen_toks`` → ``max_tokens``, 256 when unset; ``temperature`` 0 when unset; the rest into the body), then
scores each attempt alone: the response goes through the task's filter pipelines (``filter_list``) and
``process_results``, as lm-eval's evaluator does per document. The first metric of the first filter is the
reward; every metric of every filter is in the step's scoring details as ``metric,filter``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from workbench.environments.base import AnswerKeyEntry, Capabilities, EvalEnvironment, SeedResult, VerifyResult
from workbench.errors import UsageError
from workbench.lmeval.loading import load_tasks
from workbench.lmeval.uri import LmEvalUri
from workbench.types import Message

if TYPE_CHECKING:
    from lm_eval.api.instance import Instance
    from lm_eval.api.task import Task

DEFAULT_MAX_GEN_TOKS = 256
"""``TemplateAPI``'s ``max_gen_toks``: what lm-eval's API models ask for when a task sets no limit."""
MAX_STOP_SEQUENCES = 4
"""``LocalChatCompletion`` sends at most four stop sequences (the OpenAI API's limit)."""
SOLUTION_MARK = "####"
"""A target in GSM8K's form (worked solution, ``####``, final answer): the mock answers the part after it."""


@dataclass(frozen=True, slots=True)
class _Doc:
    """One document of one task, with the requests lm-eval built for it."""

    task: str
    doc_id: int
    doc: dict[str, Any]
    chat: Instance
    messages: tuple[Message, ...]
    prompt: str
    target: str
    task_id: str


def _json_default(value: object) -> str:
    return str(value)


def doc_identity(doc: dict[str, Any]) -> str:
    """A document's identity: the hash of its content (so runs pair across harnesses), not its position."""
    data = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY, default=_json_default)
    return hashlib.sha256(data).hexdigest()[:16]


def _target_text(target: object) -> str:
    if isinstance(target, list):
        return " | ".join(map(str, target))
    return str(target)


class JsonChatStr(NamedTuple):
    """``lm_eval.models.api_models.JsonChatStr``, field for field: a chat history as JSON. Not imported from there:
    that module imports aiohttp, requests and tenacity (a few tenths of a second) for nothing nel calls."""

    prompt: str

    def encode(self, encoding: str) -> bytes:
        return self.prompt.encode(encoding)


def _chat_template(history: list[dict[str, str]], add_generation_prompt: bool = True) -> JsonChatStr:
    """``TemplateAPI.apply_chat_template`` without a tokenizer: the history as JSON, decoded before sending."""
    return JsonChatStr(json.dumps(history, ensure_ascii=False))


def generation_settings(gen_kwargs: dict[str, Any]) -> dict[str, Any]:
    """A task's ``generation_kwargs`` as nel's sampling settings, mapped as ``LocalChatCompletion._create_payload``
    maps them: ``do_sample`` dropped, ``max_tokens`` or ``max_gen_toks`` (else 256), ``temperature`` (else 0),
    ``until`` as ``stop`` (first four), anything else sent as it is."""
    rest = dict(gen_kwargs)
    rest.pop("do_sample", None)
    max_tokens = rest.pop("max_tokens") if "max_tokens" in rest else rest.pop("max_gen_toks", DEFAULT_MAX_GEN_TOKS)
    until = rest.pop("until", None)
    stops = [until] if isinstance(until, str) else list(until or [])
    settings: dict[str, Any] = {"max_tokens": int(max_tokens), "temperature": rest.pop("temperature", 0)}
    if stops:
        settings["stop"] = tuple(stops[:MAX_STOP_SEQUENCES])
    if "top_p" in rest:
        settings["top_p"] = rest.pop("top_p")
    if rest:
        settings["extra_body"] = rest
    return settings


class LmEvalEnvironment(EvalEnvironment):
    """The documents of an lm-eval task (or of a group's tasks), prompted, filtered and scored by lm-eval."""

    max_response_chars = 512 * 1024
    capabilities = Capabilities(scoring="thread")  # a task's filters and process_results are its own code

    def __init__(self, uri: LmEvalUri, shown: str) -> None:
        import lm_eval

        self.name = f"lm-eval-{uri.task}"  # a run id and a directory name: the URI's query is in data_hash
        self.uri, self.shown = uri, shown
        self._lm_eval_version = getattr(lm_eval, "__version__", "?")
        self._tasks: dict[str, Task] = dict(load_tasks(uri, shown))
        self._docs: list[_Doc] = []
        for name, task in self._tasks.items():
            self._docs += self._build(name, task)
        if not self._docs:
            raise UsageError(f"{shown}: lm-eval task {uri.task!r} has no documents")
        self._generation = self._common_generation(shown)
        self._by_answer: dict[str, int] = {}
        for i, d in enumerate(self._docs):
            self._by_answer.setdefault(d.target, i)
            self._by_answer.setdefault(_split_target(d.target)[0], i)
        self._hash = self._data_hash()

    def _build(self, name: str, task: Task) -> list[_Doc]:
        """lm-eval's requests for every document of ``task``: chat form, then plain form, each from the same
        few-shot seed (the sampler draws in document order, as in lm-eval's own run)."""
        shared = {"rank": 0, "world_size": 1, "cache_requests": False, "system_instruction": None,
                  "fewshot_as_multiturn": self.uri.fewshot_as_multiturn}
        task.set_fewshot_seed(seed=self.uri.fewshot_seed)
        task.build_all_requests(**shared, apply_chat_template=True, chat_template=_chat_template, tokenizer_name="")
        chat = list(task.instances)
        task.set_fewshot_seed(seed=self.uri.fewshot_seed)
        task.build_all_requests(**shared, apply_chat_template=False, chat_template=None, tokenizer_name="")
        plain = {inst.doc_id: inst.args[0] for inst in task.instances}
        docs = []
        for inst in chat:
            messages = tuple(json.loads(inst.args[0].prompt))
            docs.append(_Doc(task=name, doc_id=int(inst.doc_id or 0), doc=inst.doc, chat=inst, messages=messages,
                             prompt=str(plain[inst.doc_id]), target=_target_text(task.doc_to_target(inst.doc)),
                             task_id=doc_identity(inst.doc)))
        return docs

    def _common_generation(self, shown: str) -> dict[str, Any]:
        settings = {repr(generation_settings(d.chat.args[1])) for d in self._docs}
        if len(settings) > 1:
            raise UsageError(f"{shown}: its tasks ask for different generation settings (generation_kwargs); run "
                             "them one task at a time")
        return generation_settings(self._docs[0].chat.args[1])

    def _data_hash(self) -> str:
        h = hashlib.sha256(f"lm-eval {self._lm_eval_version}\0".encode())
        h.update(orjson.dumps(self.uri.identity(), option=orjson.OPT_SORT_KEYS))
        for name, task in self._tasks.items():
            h.update(b"\0" + name.encode())
            h.update(orjson.dumps(task.dump_config(), option=orjson.OPT_SORT_KEYS, default=_json_default))
        for d in self._docs:
            h.update(b"\0" + orjson.dumps([d.task_id, d.messages, d.prompt, d.target], default=_json_default))
        return h.hexdigest()[:16]

    def __len__(self) -> int:
        return len(self._docs)

    def seed(self, idx: int) -> SeedResult:
        if not 0 <= idx < len(self._docs):
            raise IndexError(f"{self.name}: problem index {idx} out of range 0..{len(self._docs) - 1}")
        d = self._docs[idx]
        metadata: dict[str, Any] = {"idx": idx, "lm_eval_task": d.task, "doc_id": d.doc_id}
        if len(self._tasks) > 1:
            metadata["category"] = d.task
        return SeedResult(prompt=d.prompt, messages=d.messages, expected_answer=d.target, task_id=d.task_id,
                          metadata=metadata)

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        """lm-eval's verdict on one response: its filter pipelines, then ``process_results`` on the document.

        Without the document's index (the mock model checking a reply of its own), a document whose target is
        ``expected`` stands in: a metric that compares with the target scores the same."""
        idx = metadata.get("idx")
        if idx is None:
            idx = self._by_answer.get(expected)
            if idx is None:
                raise KeyError(f"{self.name}: no document has the target {expected!r}")
        d = self._docs[int(idx)]
        task = self._tasks[d.task]
        from lm_eval.api.instance import Instance

        inst = Instance(request_type=d.chat.request_type, doc=d.doc, arguments=d.chat.arguments, idx=0,
                        metadata=(d.task, d.doc_id, 1))
        inst.resps.append(response)
        scores: dict[str, float] = {}
        filtered: dict[str, Any] = {}
        primary: tuple[str, float] | None = None
        for ensemble in task._filters:
            ensemble.apply([inst])
            key = ensemble.name
            filtered[key] = inst.filtered_resps[key]
            for metric, value in task.process_results(d.doc, [inst.filtered_resps[key]]).items():
                if isinstance(value, bool | int | float):
                    scores[f"{metric},{key}"] = float(value)
                    if primary is None:
                        primary = (f"{metric},{key}", float(value))
        if primary is None:
            raise UsageError(f"{self.name}: lm-eval task {d.task!r} gives no numeric per-document metric")
        first = next(iter(filtered.values()))
        return VerifyResult(
            reward=primary[1],
            extracted_answer=None if first is None else str(first),
            scoring_details={"method": "lm-eval", "metric": primary[0], "scores": scores,
                             "filtered": {k: v if isinstance(v, str | int | float) else str(v)
                                          for k, v in filtered.items()}},
        )

    @property
    def data_hash(self) -> str:
        return self._hash

    def generation(self) -> dict[str, Any]:
        """The task's own sampling settings (``generation_kwargs`` mapped as lm-eval sends them)."""
        return dict(self._generation)

    def answer_key(self) -> Iterator[AnswerKeyEntry]:
        """For the mock model: the document's text as the prompt carries it, and the answer (the part after
        ``####`` of a GSM8K-style target, the worked solution before it)."""
        for d in self._docs:
            last_user = next((m["content"] for m in reversed(d.messages) if m.get("role") == "user"), d.prompt)
            text = self._tasks[d.task].doc_to_text(d.doc)
            question = text if isinstance(text, str) and text and text in str(last_user) else str(last_user)
            answer, solution = _split_target(d.target)
            yield AnswerKeyEntry(question=question, answer=answer, solution=solution)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": f"lm-evaluation-harness task {self.uri.task} ({self.shown})",
                "domain": "", "size": len(self), "default_repeats": 1, "scorer": "lm-eval",
                "source": f"lm-eval {self._lm_eval_version}: {', '.join(self._tasks)}",
                "generation": self.generation()}


def _split_target(target: str) -> tuple[str, str | None]:
    """``(answer, worked solution)`` of a target in GSM8K's form, else ``(target, None)``."""
    if SOLUTION_MARK not in target:
        return target.strip(), None
    solution, _, answer = target.rpartition(SOLUTION_MARK)
    return answer.strip(), solution.strip() or None
