"""A split of a hub dataset as local files, through ``huggingface_hub`` (its cache, its offline rules).

The library reads ``HF_HOME``/``HF_HUB_CACHE``, ``HF_HUB_OFFLINE``, ``HF_ENDPOINT`` and ``HF_TOKEN`` itself; this
module never reads or passes the token, so it cannot leak it. Online, the revision is resolved to a commit sha
by the hub and only the split's files are downloaded; offline (or the hub unreachable), the cached snapshot of
the revision is used. Every failure is one line: not present, repo or revision not found, gated.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.datasources.layout import split_files
from workbench.datasources.problems import DataNotPresent
from workbench.datasources.uri import HubRef
from workbench.errors import RunFailed, UsageError
from workbench.extras import missing_module, require

if TYPE_CHECKING:
    from huggingface_hub import HfApi

README = "README.md"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The split's files of one commit of a dataset repo, on disk."""

    ref: HubRef
    """As asked for, with ``revision`` the resolved commit sha."""
    requested: str
    """The revision as asked for (a branch, a tag or a sha)."""
    root: Path
    files: tuple[str, ...]
    """The split's files, relative to ``root`` (paths in the repo)."""

    def paths(self) -> list[Path]:
        return [self.root / f for f in self.files]


def _hub_failure(ref: HubRef, exc: Exception, benchmark: str | None) -> Exception:
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = ref.uri()
    if isinstance(exc, GatedRepoError):
        return UsageError(f"dataset {where} is gated: set HF_TOKEN to a token of an account that has accepted "
                          f"its terms on the hub (https://huggingface.co/datasets/{ref.repo})")
    if isinstance(exc, RepositoryNotFoundError):
        return UsageError(f"dataset {where}: no dataset repository {ref.repo!r} on the hub (if it is private, set "
                          "HF_TOKEN to a token with access)")
    if isinstance(exc, RevisionNotFoundError):
        return UsageError(f"dataset {where}: revision {ref.revision!r} does not exist in {ref.repo}")
    if isinstance(exc, LocalEntryNotFoundError | OfflineModeIsEnabled | ConnectionError):
        return DataNotPresent(where, benchmark, ref.repo)
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        return RunFailed(f"dataset {where}: the hub answered HTTP {status}; try again later")
    return exc


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())


def fetch_split(ref: HubRef, *, benchmark: str | None = None) -> Snapshot:
    """The files of ``ref``'s split at its revision: downloaded (online) or from the cache (offline)."""
    require("hub", f"dataset {ref.uri()}")
    import httpx2
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if _offline():
        return cached_split(ref, benchmark=benchmark)
    api = HfApi(library_name="nel-workbench")
    try:
        info = api.dataset_info(ref.repo, revision=ref.revision)
    except (OfflineModeIsEnabled, httpx2.ConnectError, httpx2.TimeoutException):
        return cached_split(ref, benchmark=benchmark)
    except HfHubHTTPError as exc:
        raise _hub_failure(ref, exc, benchmark) from None
    sha = str(info.sha)
    listing = [s.rfilename for s in info.siblings or []]
    pinned = ref.at(sha)
    readme = None
    if README in listing and not ref.files and not ref.path:
        readme = _download(api, pinned, README, benchmark).read_text(encoding="utf-8", errors="replace")
    chosen = split_files(ref, listing, readme)
    paths = [_download(api, pinned, name, benchmark) for name in chosen]
    root = Path(str(paths[0])[: -len(chosen[0])])
    return Snapshot(pinned, ref.revision, root, tuple(chosen))


def _download(api: HfApi, ref: HubRef, filename: str, benchmark: str | None) -> Path:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        return Path(hf_hub_download(ref.repo, filename, repo_type="dataset", revision=ref.revision,
                                    endpoint=api.endpoint, library_name="nel-workbench"))
    except (HfHubHTTPError, LocalEntryNotFoundError) as exc:
        raise _hub_failure(ref, exc, benchmark) from None


def cached_split(ref: HubRef, *, benchmark: str | None = None) -> Snapshot:
    """``ref``'s split from the cached snapshot of its revision (a branch is read from the cache's ``refs/``)."""
    require("hub", f"dataset {ref.uri()}")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(ref.repo, repo_type="dataset", revision=ref.revision,
                                        local_files_only=True))
    except LocalEntryNotFoundError:
        raise DataNotPresent(ref.uri(), benchmark, ref.repo) from None
    listing = sorted(_files_under(folder))
    readme_path = folder / README
    readme = readme_path.read_text(encoding="utf-8", errors="replace") if readme_path.is_file() else None
    chosen = split_files(ref, listing, None if ref.files or ref.path else readme)
    return Snapshot(ref.at(folder.name), ref.revision, folder, tuple(chosen))


def _files_under(folder: Path) -> list[str]:
    out = []
    for dirpath, _dirs, names in os.walk(folder):
        rel = os.path.relpath(dirpath, folder)
        out += [name if rel == "." else f"{rel}/{name}".replace(os.sep, "/") for name in names]
    return out


def is_cached(ref: HubRef) -> bool:
    """Does the Hugging Face cache hold a snapshot of ``ref``'s revision (without reading any file)? Without the
    [hub] extra nothing can read it: no."""
    if missing_module("hub") is not None:
        return False
    from huggingface_hub import constants  # light (the library's settings); its download module is not

    folder = Path(constants.HF_HUB_CACHE) / ("datasets--" + ref.repo.replace("/", "--"))  # the cache's layout
    sha = ref.revision
    if not ref.pinned:
        try:
            sha = (folder / "refs" / ref.revision).read_text().strip()
        except OSError:
            return False
    return (folder / "snapshots" / sha).is_dir()
