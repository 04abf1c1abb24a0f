"""Read a W&B offline run's ``.wandb`` transaction log back, as ``wandb sync`` does.

wandb 0.31 reads the file in its Go core and no longer ships a Python reader, so the tests read it here: a
LevelDB-style log (a 7-byte file header ``:W&B``, 0xBEE1, version; then 32 KiB blocks of records, each a 7-byte
header — CRC-32, length, type FULL/FIRST/MIDDLE/LAST — and its bytes), each record a ``wandb_internal_pb2.Record``.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import orjson
from wandb.proto import wandb_internal_pb2 as pb

_BLOCK = 32 * 1024
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    """Every record of the log, checking each chunk's CRC (a masked CRC-32C in LevelDB; wandb uses CRC-32 of
    the type byte and the data, which is what is checked here)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B transaction log"
    pos, out, pending = _HEADER, [], b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        if length == 0 and kind == 0:  # the zero padding of a block's tail
            pos += left
            continue
        chunk = data[pos + _HEADER:pos + _HEADER + length]
        assert zlib.crc32(bytes([kind]) + chunk) == crc, f"{path}: bad CRC at {pos}"
        pos += _HEADER + length
        pending += chunk
        if kind in (_FULL, _LAST):
            record = pb.Record()  # type: ignore[attr-defined]
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


def run_facts(path: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """``(config, summary, history keys)`` of the run the log holds (each value parsed from its JSON)."""
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    history: list[str] = []
    for r in records(path):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            config.update({u.key: orjson.loads(u.value_json) for u in r.run.config.update})
        elif kind == "config":
            config.update({u.key: orjson.loads(u.value_json) for u in r.config.update})
        elif kind == "summary":
            summary.update({u.key or ".".join(u.nested_key): orjson.loads(u.value_json) for u in r.summary.update})
        elif kind == "history":
            history += [i.key or i.nested_key[0] for i in r.history.item]
    return config, summary, history
