"""Images in prompts: decoding, the stored reference in place of the base64, and the transcript placeholder."""

from __future__ import annotations

import base64
import importlib.util
import struct
from pathlib import Path
from typing import Any

import pytest

from workbench.images import (
    ImageError,
    check_images,
    data_url,
    decode_data_url,
    externalize,
    inspect_image,
    placeholder,
    png_bytes,
)
from workbench.resources import benchmarks_dir

RED_4x2 = png_bytes(4, 2, bytes([255, 0, 0]) * 8)


def _message(url: str, detail: str | None = None) -> dict[str, Any]:
    image = {"url": url, **({"detail": detail} if detail else {})}
    return {"role": "user", "content": [{"type": "text", "text": "Count."}, {"type": "image_url", "image_url": image}]}


def test_a_png_written_here_decodes_with_its_size_type_and_hash():
    info = inspect_image(RED_4x2)
    assert (info.mime, info.width, info.height, info.n_bytes) == ("image/png", 4, 2, len(RED_4x2))
    assert info.sha256 == __import__("hashlib").sha256(RED_4x2).hexdigest()


@pytest.mark.parametrize(("data", "why"), [
    (RED_4x2[:-20], "cut short"),
    (RED_4x2[:30] + bytes([RED_4x2[30] ^ 1]) + RED_4x2[31:], "bad CRC"),
    (b"GIF89a" + struct.pack("<HH", 3, 3) + b"\x00" * 4, "GIF cut short"),
    (b"hello, world", "not an image"),
    (b"\xff\xd8\xff\xe0" + b"\x00" * 40, "JPEG cut short"),
])
def test_an_image_that_cannot_be_decoded_says_why(data: bytes, why: str):
    with pytest.raises(ImageError, match=why):
        inspect_image(data)


def test_a_data_url_must_be_base64_of_an_image():
    assert decode_data_url(data_url(RED_4x2)) == ("image/png", RED_4x2)
    with pytest.raises(ImageError, match="bad base64"):
        decode_data_url("data:image/png;base64,@@not base64@@")
    with pytest.raises(ImageError, match="must be base64"):
        decode_data_url("data:image/png,rawbytes")
    assert check_images([_message("data:image/png;base64,AAAA")]) is not None
    assert check_images([_message(data_url(RED_4x2)), _message("https://example.com/cat.png")]) is None


def test_externalize_keeps_one_copy_per_hash_and_a_reference_in_the_transcript():
    stored, images = externalize([_message(data_url(RED_4x2), "low"), _message(data_url(RED_4x2))])
    sha = inspect_image(RED_4x2).sha256
    assert images == {sha: RED_4x2}
    ref = stored[0]["content"][1]
    assert ref == {"type": "image", "sha256": sha, "mime": "image/png", "bytes": len(RED_4x2), "width": 4,
                   "height": 2, "detail": "low"}
    assert stored[0]["content"][0] == {"type": "text", "text": "Count."}
    assert "base64" not in str(stored)


def test_an_undecodable_image_is_kept_as_its_reason_not_its_bytes():
    stored, images = externalize([_message("data:image/png;base64," + base64.b64encode(b"nope").decode())])
    assert images == {}
    assert stored[0]["content"][1]["error"].startswith("not an image")
    assert placeholder(stored[0]["content"][1]).startswith("[image not decodable: not an image")


def test_the_placeholder_names_type_size_and_short_hash():
    sha = inspect_image(RED_4x2).sha256
    assert placeholder({"type": "image", "sha256": sha, "mime": "image/png", "bytes": 12_595}) == \
        f"[image png 12.3 KB sha256:{sha[:8]}]"
    # an image not stored yet (a live prompt) shows the same placeholder, computed from its bytes
    assert placeholder(_message(data_url(RED_4x2))["content"][1]) == \
        f"[image png {len(RED_4x2)} B sha256:{sha[:8]}]"


def test_shape_count_prepare_reproduces_its_data_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = benchmarks_dir() / "shape_count"
    spec = importlib.util.spec_from_file_location("shape_count_prepare", folder / "prepare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "OUT", tmp_path / "data.jsonl")
    module.main()
    assert (tmp_path / "data.jsonl").read_bytes() == (folder / "data.jsonl").read_bytes()


def test_responses_input_renames_parts_and_the_runs_detail_wins_over_the_datas():
    from workbench.model.content import chat_messages, responses_input

    url = data_url(RED_4x2)
    messages = (_message(url, "high"), {"role": "assistant", "content": [{"type": "text", "text": "Two."}]},
                {"role": "user", "content": "And now?"})
    items = responses_input(messages, None)
    assert items[0]["content"] == [{"type": "input_text", "text": "Count."},
                                   {"type": "input_image", "image_url": url, "detail": "high"}]
    assert items[1]["content"] == [{"type": "output_text", "text": "Two."}]
    assert items[2] is messages[2]  # string content passes through untouched
    assert responses_input(messages, "low")[0]["content"][1]["detail"] == "low"
    assert chat_messages(messages, "low")[0]["content"][1]["image_url"] == {"url": url, "detail": "low"}
    assert chat_messages(messages, None) == list(messages)
