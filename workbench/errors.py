"""Errors a user can act on. The CLI prints their message on one line and exits.

``UsageError`` (exit 2) is for bad input: flags, files, config, store paths.
``RunFailed`` (exit 1) is for a run that could not complete: an unreachable
model, an endpoint that rejects every request.
"""


class NelError(Exception):
    """Base class: the message is shown to the user as is."""

    exit_code = 1


class UsageError(NelError):
    exit_code = 2


class RunFailed(NelError):
    exit_code = 1
