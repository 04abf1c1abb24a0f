"""The code harness: a problem's tests run against a Python program in a sandbox, and the program cannot fake a pass.

``code_exec`` copies this file into the sandbox and runs ``python3 -I harness.py ENTRY_POINT`` (standard library
only: it runs under the sandbox's Python, not the workbench's). The program and the tests never share a process,
because in one process the program can do anything the tests can: answer ``==`` with an object whose ``__eq__``
is always true, replace a helper or a builtin the tests call, jump over an ``assert`` with ``sys.settrace``, or dig
the pass token out of the harness's frames. So:

* the harness forks a worker first, then makes itself non-dumpable (a process of the same user can then neither
  ptrace it nor read its memory), reads its secrets (``.nel-harness``: the nonce, the tests, the problem's own
  code) and deletes the file, all before the worker loads any of the program's code;
* the worker runs the program; the tests call its entry point through a pipe.
  Arguments and results cross in a tagged format and are rebuilt here as Python's own built-in values only (``None``,
  ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes`` and lists, tuples, dicts, sets and frozensets of
  them), so no object of the program's ever reaches a comparison in the tests;
* the tests (``check(candidate)``) run here, with the problem's own helpers (HumanEval's ``poly``,
  ``encode_cyclic``) from the problem's code, not from the program, and with ``-I`` nothing is imported from the
  working directory the program can write to;
* a pass is exit status 0 *and* the line ``NEL-PASSED: <nonce>`` on stderr, printed only after ``check``
  returned: the program never sees the nonce, so ``os._exit(0)``, a printed marker or a killed harness is a fail.

What the program can still do is compute the right values: it sees the arguments of each call, as any function
does. See docs/sandbox.md ("Score integrity").
"""

from __future__ import annotations

import builtins
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs more to import than the rest of the harness's start
    from typing import Any, NoReturn

# Imported lazily, on the paths that need them: linecache, traceback. The harness starts on every attempt, so its
# start-up is most of its cost; subprocess is not used at all (the worker is a fork).

SECRETS_FILE = ".nel-harness"
SOLUTION_FILE = "solution.py"
TESTS_FILE = "tests.py"
PROBLEM_FILE = "problem.py"
"""Names the tests and the problem's code carry in tracebacks; neither is ever written where the program can read it."""
FAILED_AT = "NEL-FAILED-AT:"
PASSED = "NEL-PASSED:"
GO = b"go\n"
MAX_MESSAGE = 256 * 1024 * 1024
"""Largest message either side accepts (a bigger one is a malformed one)."""

# Exit statuses (a worker killed by signal N ends the harness with 128 + N, as a shell would report it).
EXIT_CHECK, EXIT_SOLUTION, EXIT_TESTS, EXIT_ENTRY_POINT, EXIT_WORKER_GONE, EXIT_HARNESS = 1, 2, 3, 4, 5, 6

MAX_DEPTH = 100
"""Deepest nesting of a value that crosses the pipe (deeper is refused, not a crash of the harness)."""
PR_SET_DUMPABLE = 4
ALLOWED = "None, bool, int, float, complex, str, bytes, and lists, tuples, dicts, sets and frozensets of them"


# --- values across the pipe -------------------------------------------------------------------------------------
# A tagged, length-prefixed format of our own rather than JSON or marshal: the decoder builds only built-in values,
# reads untrusted bytes without any parser that was not written for that, and imports nothing (json's import of re
# alone costs more than the rest of the harness's start).


def dumps(value: Any) -> bytes:
    """``value`` in the wire format; an instance of a subclass of a built-in type is taken as that type (a
    ``Counter`` as a ``dict``), anything else is a ``TypeError``."""
    out: list[bytes] = []
    _put(value, out, 0)
    return b"".join(out)


def _put(value: Any, out: list[bytes], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"a value nested more than {MAX_DEPTH} deep")
    if value is None:
        out.append(b"N")
    elif isinstance(value, bool):
        out.append(b"T" if value is True else b"F")
    elif isinstance(value, int):
        out.append(b"i" + hex(int(value)).encode() + b";")  # hex: no limit on a huge int's digits, unlike str()
    elif isinstance(value, float):
        out.append(b"f" + float(value).hex().encode() + b";")  # exact, nan and inf included
    elif isinstance(value, complex):
        number = complex(value)
        out.append(b"c" + number.real.hex().encode() + b";" + number.imag.hex().encode() + b";")
    elif isinstance(value, str):
        data = str.__str__(value).encode("utf-8", "surrogatepass")
        out.append(b"s%d:" % len(data) + data)
    elif isinstance(value, bytes | bytearray):
        data = bytes(value)
        out.append(b"b%d:" % len(data) + data)
    elif isinstance(value, dict):
        items = list(dict.items(value))
        out.append(b"d%d:" % len(items))
        for key, item in items:
            _put(key, out, depth + 1)
            _put(item, out, depth + 1)
    else:
        for kind, tag in ((list, b"l"), (tuple, b"t"), (set, b"S"), (frozenset, b"z")):
            if isinstance(value, kind):
                items = list(value)
                out.append(tag + b"%d:" % len(items))
                for item in items:
                    _put(item, out, depth + 1)
                return
        kind = type(value)
        raise TypeError(f"a {kind.__module__}.{kind.__qualname__} cannot cross between the tests and the program "
                        f"(only {ALLOWED} do)")


def loads(data: bytes) -> Any:
    """The built-in value ``data`` describes, built here: nothing of the sender's objects survives."""
    reader = _Reader(data)
    value = reader.value(0)
    if reader.pos != len(data):
        raise ValueError("bytes left after the value")
    return value


_CONTAINERS: dict[bytes, Any] = {b"l": list, b"t": tuple, b"S": set, b"z": frozenset}


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("the value is cut short")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def until(self, stop: bytes) -> str:
        end = self.data.find(stop, self.pos, self.pos + 100_000_000)
        if end < 0:
            raise ValueError("the value is cut short")
        chunk = self.data[self.pos:end]
        self.pos = end + 1
        return chunk.decode("ascii")

    def count(self) -> int:
        text = self.until(b":")
        if not text.isdigit() or len(text) > 12:
            raise ValueError(f"not a count: {text[:20]!r}")
        return int(text)

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise ValueError(f"a value nested more than {MAX_DEPTH} deep")
        tag = self.take(1)
        if tag in (b"N", b"T", b"F"):
            return {b"N": None, b"T": True, b"F": False}[tag]
        if tag == b"i":
            return int(self.until(b";"), 16)
        if tag == b"f":
            return float.fromhex(self.until(b";"))
        if tag == b"c":
            return complex(float.fromhex(self.until(b";")), float.fromhex(self.until(b";")))
        if tag == b"s":
            return self.take(self.count()).decode("utf-8", "surrogatepass")
        if tag == b"b":
            return self.take(self.count())
        if tag in _CONTAINERS:
            n = self.count()
            return _CONTAINERS[tag](self.value(depth + 1) for _ in range(n))
        if tag == b"d":
            n = self.count()
            return {self.value(depth + 1): self.value(depth + 1) for _ in range(n)}
        raise ValueError(f"unknown tag {tag!r}")


def read_message(stream: Any) -> dict[str, Any] | None:
    """The next message, or ``None`` at the end of the stream or for anything malformed."""
    try:
        header = stream.readline(20)
        if not header.endswith(b"\n") or not header[:-1].isdigit() or int(header) > MAX_MESSAGE:
            return None
        data = stream.read(int(header))
        message = loads(data) if len(data) == int(header) else None
    except (OSError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return message if type(message) is dict else None


# --- the worker: the program's process ----------------------------------------------------------------------------


def worker(entry_point: str, requests_fd: int, replies_fd: int) -> NoReturn:
    """Wait for the harness's go, load the program, say whether its entry point exists, then answer calls until
    the harness closes the pipe."""
    requests = os.fdopen(requests_fd, "rb")
    replies = os.fdopen(replies_fd, "wb")

    def send(message: dict[str, Any]) -> None:
        data = dumps(message)
        replies.write(b"%d\n" % len(data) + data)
        replies.flush()

    if requests.readline() != GO:  # the harness gave up before the program was to run (broken tests, say)
        os._exit(0)
    namespace: dict[str, Any] = {"__name__": "solution"}  # a __main__ block in the reply does not run
    try:
        with open(SOLUTION_FILE, encoding="utf-8") as f:
            source = f.read()
        exec(compile(source, SOLUTION_FILE, "exec"), namespace)
    except BaseException as exc:
        print_failure(exc)
        send({"loaded": False, "error": _describe(exc)})
        sys.exit(0)
    function = namespace.get(entry_point)
    if not callable(function):
        send({"loaded": False, "missing": True})
        sys.exit(0)
    send({"loaded": True})
    while (request := read_message(requests)) is not None:
        args, kwargs = request.get("args", []), request.get("kwargs", {})
        try:
            result = function(*args, **kwargs)
        except BaseException as exc:
            print_failure(exc)
            send({"raised": type(exc).__name__, "message": _describe(exc), "at": _program_line(exc)})
            continue
        try:
            send({"result": result})
        except (TypeError, ValueError, RecursionError) as exc:
            send({"raised": "TypeError", "message": f"{entry_point}() returned a value the tests cannot "
                  f"compare safely: {exc}"})
    sys.stdout.flush()  # the harness closed the pipe: all is said; skip the interpreter's slow way out
    sys.stderr.flush()
    os._exit(0)


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:1000]
    except BaseException:  # a __str__ that raises
        return type(exc).__name__


def _program_line(exc: BaseException) -> str | None:
    import traceback

    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == SOLUTION_FILE:
            return f"{frame.filename}:{frame.lineno}: {frame.line}"
    return None


# --- the harness ------------------------------------------------------------------------------------------------


class ProgramGone(BaseException):
    """The worker ended (``os._exit``, a signal, a crash): a ``BaseException``, so no ``except Exception`` in the
    tests can swallow it."""


class Program:
    """The worker process (forked before the harness reads any secret) and the two pipes to it."""

    def __init__(self, entry_point: str) -> None:
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(to_worker_w)
            os.close(from_worker_r)
            worker(entry_point, to_worker_r, from_worker_w)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.pid = pid
        self._requests = os.fdopen(to_worker_w, "wb")
        self._replies = os.fdopen(from_worker_r, "rb")
        self.gone = False
        self._status: int | None = None

    def start(self) -> dict[str, Any]:
        """Let the worker load the program; its first message says whether that worked."""
        self._send(GO)
        return self.receive()

    def _send(self, data: bytes) -> None:
        try:
            self._requests.write(data)
            self._requests.flush()
        except OSError:
            self.gone = True
            raise ProgramGone from None

    def receive(self) -> dict[str, Any]:
        """The worker's next message: built-in values only (``read_message``); ``ProgramGone`` if there is none."""
        message = read_message(self._replies)
        if message is None:
            self.gone = True
            raise ProgramGone
        return message

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.gone:
            raise ProgramGone
        request = dumps({"args": list(args), "kwargs": kwargs})  # a TypeError here: the tests passed an object
        self._send(b"%d\n" % len(request) + request)
        reply = self.receive()
        if "result" in reply:
            return reply["result"]
        raise _program_exception(reply)

    def wait(self, timeout: float) -> int | None:
        """The worker's exit code (``-N`` for signal N), or ``None`` if it still runs after ``timeout`` s."""
        import time

        deadline = time.monotonic() + timeout
        while self._status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._status = os.waitstatus_to_exitcode(status)
            elif time.monotonic() >= deadline:
                return None
            else:
                time.sleep(0.0005)
        return self._status

    def stop(self) -> None:
        """Close its pipe (it exits, flushing its output); kill it if it lingers."""
        try:  # noqa: SIM105  (contextlib would be one more import on every attempt's start)
            self._requests.close()
        except OSError:
            pass
        if self.wait(1.0) is None:
            self.kill()

    def kill(self) -> int:
        try:  # noqa: SIM105
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        code = self.wait(30.0)
        return -9 if code is None else code

    def exit_as_it_did(self) -> NoReturn:
        """End the harness the way the worker ended: 128 + N for signal N (e.g. an OOM kill), else EXIT_WORKER_GONE."""
        code = self.wait(1.0)  # it closed its pipe: it is on its way out (or lingers, and is killed)
        if code is None:
            code = self.kill()
        print("the program's process ended before the tests finished" + (f" (exit status {code})" if code >= 0
              else f" (signal {-code})"), file=sys.stderr)
        sys.stderr.flush()
        os._exit(128 - code if code < 0 else EXIT_WORKER_GONE)


def _program_exception(reply: dict[str, Any]) -> Exception:
    """An exception of the built-in type the program raised (a ``RuntimeError`` for one of its own types)."""
    name, message = str(reply.get("raised", "Exception")), str(reply.get("message", ""))
    kind = getattr(builtins, name, None)
    # Never a StopIteration: raised through map() or next() in the tests it would end their loop early, a pass.
    ending = isinstance(kind, type) and issubclass(kind, StopIteration | StopAsyncIteration)
    if ending or not (isinstance(kind, type) and issubclass(kind, Exception)):
        kind = RuntimeError
    try:
        exc = kind(message)
    except Exception:  # a built-in whose constructor wants other arguments (UnicodeDecodeError...)
        exc = RuntimeError(message)
    exc.nel_at = reply.get("at") if isinstance(reply.get("at"), str) else None  # type: ignore[attr-defined]
    return exc


def protect() -> None:
    """Non-dumpable: a process of the same user (the program's) can neither ptrace this one nor read its memory."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def read_secrets() -> tuple[str, str, str]:
    """``(nonce, tests, problem code)``, read from the secrets file (``dumps`` of a dict), which is then deleted."""
    with open(SECRETS_FILE, "rb") as f:
        secrets = loads(f.read())
    os.unlink(SECRETS_FILE)
    nonce, tests, problem = secrets["nonce"], secrets["tests"], secrets.get("problem", "")
    if not all(type(part) is str for part in (nonce, tests, problem)) or len(nonce) < 16:
        raise ValueError(f"{SECRETS_FILE} is malformed")
    return nonce, tests, problem


TRUSTED_SOURCES: dict[str, str] = {}
"""The tests' and the problem's code by file name, for tracebacks: no file holds them."""


def run_trusted(source: str, filename: str, namespace: dict[str, Any]) -> None:
    """Run the tests or the problem's code."""
    TRUSTED_SOURCES[filename] = source
    try:
        exec(compile(source, filename, "exec"), namespace)
    except BaseException as exc:
        fail(exc, EXIT_TESTS)


def print_failure(exc: BaseException) -> None:
    """The traceback, then ``NEL-FAILED-AT: file:line: source`` of the innermost line of the program or the tests."""
    import linecache
    import traceback

    for filename, source in TRUSTED_SOURCES.items():
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    traceback.print_exception(type(exc), exc, exc.__traceback__)
    at = getattr(exc, "nel_at", None)
    if not isinstance(at, str):
        at = None
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if frame.filename in (SOLUTION_FILE, TESTS_FILE, PROBLEM_FILE):
                at = f"{frame.filename}:{frame.lineno}: {frame.line}"
                break
    if at:
        print(f"{FAILED_AT} {' '.join(at.split())}", file=sys.stderr)
    sys.stderr.flush()


def fail(exc: BaseException, status: int) -> NoReturn:
    print_failure(exc)
    sys.stdout.flush()
    os._exit(status)


def run_harness(entry_point: str) -> NoReturn:
    try:
        program = Program(entry_point)  # forked first: its memory never holds a secret
    except OSError as exc:  # e.g. no process left under the pids limit
        print(f"the harness could not start the program's process: {exc}", file=sys.stderr)
        sys.exit(EXIT_HARNESS)
    try:
        protect()
        nonce, tests, problem = read_secrets()
    except Exception as exc:
        print(f"the harness could not start: {exc}", file=sys.stderr)
        sys.exit(EXIT_HARNESS)
    namespace: dict[str, Any] = {"__name__": "tests"}
    run_trusted(problem, PROBLEM_FILE, namespace)
    run_trusted(tests, TESTS_FILE, namespace)
    check = namespace.get("check")
    if not callable(check):
        print("the tests do not define check()", file=sys.stderr)
        sys.exit(EXIT_TESTS)
    try:
        loaded = program.start()
    except ProgramGone:
        program.exit_as_it_did()
    if loaded.get("loaded") is not True:
        program.wait(1.0)  # let its traceback out first
        if loaded.get("missing"):
            print(f"the program does not define {entry_point}()", file=sys.stderr)
            sys.exit(EXIT_ENTRY_POINT)
        sys.exit(EXIT_SOLUTION)

    def candidate(*args: Any, **kwargs: Any) -> Any:
        return program.call(args, kwargs)

    candidate.__name__ = candidate.__qualname__ = entry_point
    namespace[entry_point] = candidate  # tests may call the function by its name (HumanEval/33 does)
    try:
        check(candidate)
    except ProgramGone:
        program.exit_as_it_did()
    except BaseException as exc:
        fail(exc, EXIT_CHECK)
    if program.gone:  # the tests swallowed its end with a bare except
        program.exit_as_it_did()
    program.stop()
    sys.stdout.flush()
    print(f"{PASSED} {nonce}", file=sys.stderr, flush=True)
    sys.exit(0)


def main(argv: list[str]) -> NoReturn:
    if len(argv) != 2:
        print(f"usage: python3 -I {os.path.basename(argv[0])} ENTRY_POINT", file=sys.stderr)
        sys.exit(EXIT_HARNESS)
    run_harness(argv[1])


if __name__ == "__main__":
    main(sys.argv)
