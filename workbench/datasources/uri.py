"""``hf://`` dataset references: NeMo Evaluator's ``hf://ORG/NAME[/PATH]?split=…&subset=…&revision=…`` and
huggingface_hub's canonical ``hf://datasets/ORG/NAME[@REV][/PATH]``, parsed into one ``HubRef``.

Parsing never contacts anything: a malformed reference fails before a run starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import parse_qsl, urlencode

from workbench.errors import UsageError

SCHEME = "hf://"
QUERY_KEYS = ("split", "subset", "revision")
_REPO_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True, slots=True)
class HubRef:
    """One split of one dataset repository on the hub, at a revision (a branch, a tag or a commit sha)."""

    repo: str
    split: str = "test"
    subset: str | None = None
    revision: str = "main"
    path: str | None = None
    """A file or folder inside the repo holding the split (else found from the repo's layout)."""
    files: tuple[str, ...] = ()
    """Globs inside the repo selecting the split's files (a built-in benchmark's ``[hub] files``)."""

    @property
    def pinned(self) -> bool:
        """Is the revision a commit sha (immutable), rather than a branch or tag to resolve?"""
        return COMMIT_SHA.match(self.revision) is not None

    def at(self, revision: str) -> HubRef:
        return replace(self, revision=revision)

    def uri(self) -> str:
        """The canonical ``hf://`` form (NeMo Evaluator's), for messages and the run's identity."""
        query = {"split": self.split, **({"subset": self.subset} if self.subset else {}), "revision": self.revision}
        return f"{SCHEME}{self.repo}{'/' + self.path if self.path else ''}?{urlencode(query)}"


def is_hub_uri(text: str) -> bool:
    return text.startswith(SCHEME)


def parse_hub_uri(text: str) -> HubRef:
    """``HubRef`` of ``text``; a malformed reference is one line saying what is wrong and the grammar."""
    if not is_hub_uri(text):
        raise UsageError(f"dataset {text!r}: not an hf:// reference")
    body, _, query = text[len(SCHEME):].partition("?")
    params = dict(parse_qsl(query, keep_blank_values=True)) if query else {}
    unknown = sorted(set(params) - set(QUERY_KEYS))
    if unknown:
        raise _bad(text, f"unknown parameter {unknown[0]!r} (known: {', '.join(QUERY_KEYS)})")
    revision = params.get("revision") or None
    if body.startswith("datasets/"):  # huggingface_hub's canonical form: hf://datasets/ORG/NAME[@REV][/PATH]
        body = body[len("datasets/"):]
        head, _, rest = body.partition("/")
        name, _, rest = rest.partition("/")
        name, at, rev = name.partition("@")
        if at:
            if revision is not None and revision != rev:
                raise _bad(text, f"two revisions: @{rev} and revision={revision}")
            revision = rev
        parts = [head, name, *([rest] if rest else [])]
    elif body.startswith(("models/", "spaces/")):
        raise _bad(text, "only dataset repositories hold benchmark data")
    else:
        parts = body.split("/", 2)
    if len(parts) < 2 or not all(_REPO_PART.match(p) for p in parts[:2]):
        raise _bad(text, "expected ORG/NAME")
    path = parts[2].strip("/") if len(parts) == 3 and parts[2].strip("/") else None
    split = params.get("split") or "test"
    return HubRef(repo=f"{parts[0]}/{parts[1]}", split=split, subset=params.get("subset") or None,
                  revision=revision or "main", path=path)


def _bad(text: str, why: str) -> UsageError:
    return UsageError(f"dataset {text!r}: {why}; the form is hf://ORG/NAME[/PATH]?split=SPLIT&subset=CONFIG"
                      "&revision=REV")
