"""Errors a user can act on. The CLI prints their message on one line and exits.

``UsageError`` (exit 2) is for bad input: flags, files, config, store paths.
``RunFailed`` (exit 1) is for a run that could not complete: an unreachable
model, an endpoint that rejects every request.
"""

from __future__ import annotations

import errno


class NelError(Exception):
    """Base class: the message is shown to the user as is."""

    exit_code = 1


class UsageError(NelError):
    exit_code = 2


class RunFailed(NelError):
    exit_code = 1


_PATH_MISTAKES = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.ENOENT,
                            errno.EEXIST})


def path_error(path: object, exc: OSError, doing: str) -> NelError:
    """One line naming ``path`` and the cause of ``exc``: a ``UsageError`` (exit 2) when the path is the mistake
    (unwritable, read-only, not a directory, missing), a ``RunFailed`` (exit 1) when the machine is (a full disk,
    an I/O error)."""
    kind = UsageError if exc.errno in _PATH_MISTAKES else RunFailed
    return kind(f"{path}: cannot {doing} ({exc.strerror or exc})")
