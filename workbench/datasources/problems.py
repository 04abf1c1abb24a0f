"""The errors of loading a dataset, each one line a user can act on (exit 2)."""

from __future__ import annotations

from workbench.errors import UsageError


class DataNotPresent(UsageError):
    """A dataset is neither frozen nor in the Hugging Face cache, and the hub cannot be asked (offline)."""

    def __init__(self, dataset: str, benchmark: str | None = None, repo: str | None = None) -> None:
        self.dataset = dataset
        self.benchmark = benchmark
        if benchmark is not None:
            fetch, who = f"`nel benchmarks pull {benchmark}`", f"benchmark {benchmark!r}: "
        else:
            fetch, who = f"`hf download {repo or 'ORG/NAME'} --repo-type dataset` (or one run)", ""
        super().__init__(f"{who}dataset {dataset} is not present here (offline, nothing cached): fetch it with "
                         f"{fetch} where the hub is reachable, or copy a Hugging Face cache that holds it and set "
                         "HF_HOME to it")
