"""The sandbox spec: sizes parse, bad fields fail naming the field; results keep the head and tail of long output."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.errors import UsageError
from workbench.sandbox.base import check_relpath
from workbench.sandbox.spec import OutputBuffer, SandboxSpec, parse_memory, truncate_output


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512m", 512 * 2**20), ("1g", 2**30), ("1.5G", 3 * 2**29), ("256MiB", 256 * 2**20), ("64k", 65536),
     ("1000", 1000), (4096, 4096), ("2 gb", 2 * 2**30)],
)
def test_memory_sizes_parse_to_bytes(text: str | int, expected: int) -> None:
    assert parse_memory(text) == expected


def test_the_defaults_are_the_safe_ones() -> None:
    spec = SandboxSpec().validate()
    assert spec.type == "docker" and spec.network == "none" and spec.mode == "per_attempt"
    assert spec.image == "nel-sandbox:bookworm" and spec.memory_bytes == 512 * 2**20 and spec.pids_limit == 128


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"type": "podman"}, "sandbox.type: expected 'docker' or 'local', got 'podman'"),
        ({"image": " "}, "sandbox.image: expected an image name"),
        ({"timeout": 0}, "sandbox.timeout: expected a number greater than 0, got 0"),
        ({"timeout": "10"}, "sandbox.timeout: expected a number greater than 0, got '10'"),
        ({"cpus": -1.0}, "sandbox.cpus: expected a number greater than 0, got -1.0"),
        ({"memory": "lots"}, "sandbox.memory: expected a size such as '512m' or '2g', got 'lots'"),
        ({"memory": "1m"}, "sandbox.memory: '1m' is too small"),
        ({"memory": True}, "sandbox.memory: expected a size such as '512m', got True"),
        ({"file_size_limit": "x"}, "sandbox.file_size_limit: expected a size"),
        ({"network": "host"}, "sandbox.network: expected 'none' or 'bridge', got 'host'"),
        ({"concurrency": 0}, "sandbox.concurrency: expected a whole number of at least 1, got 0"),
        ({"concurrency": 2.5}, "sandbox.concurrency: expected a whole number of at least 1, got 2.5"),
        ({"pids_limit": 4}, "sandbox.pids_limit: 4 is too small to start python"),
        ({"mode": "warm"}, "sandbox.mode: expected 'per_attempt' or 'pool', got 'warm'"),
    ],
)
def test_an_unusable_field_is_a_usage_error_that_names_it(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        SandboxSpec(**changes).validate()
    assert str(caught.value).startswith(message)


def test_a_local_sandbox_needs_no_image() -> None:
    assert SandboxSpec(type="local", image="").validate().type == "local"


def test_short_output_is_kept_whole() -> None:
    assert truncate_output(b"hello\n", limit=100) == "hello\n"


def test_long_output_keeps_its_head_and_tail_around_a_marker() -> None:
    text = truncate_output(b"HEAD" + b"x" * 10_000 + b"TAIL", limit=100)
    assert text.startswith("HEAD") and text.endswith("TAIL")
    assert "[9908 bytes truncated]" in text and len(text) < 200


def test_output_arriving_in_chunks_is_truncated_the_same_way() -> None:
    buffer = OutputBuffer(limit=100)
    data = b"HEAD" + b"x" * 10_000 + b"TAIL"
    for i in range(0, len(data), 7):
        buffer.add(data[i : i + 7])
    assert buffer.text() == truncate_output(data, limit=100)


def test_invalid_utf8_output_is_replaced_not_an_error() -> None:
    assert truncate_output(b"ok \xff\xfe") == "ok \ufffd\ufffd"


@pytest.mark.parametrize("path", ["/etc/passwd", "..", "../x", "a/../../x", "", "a\0b"])
def test_paths_that_leave_the_working_directory_are_refused(path: str) -> None:
    with pytest.raises(ValueError):
        check_relpath(path)


def test_relative_paths_are_normalised() -> None:
    assert check_relpath("a/./b/../c.txt") == "a/c.txt"
