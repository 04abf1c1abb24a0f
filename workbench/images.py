"""Images in prompts: data URLs in, content-addressed references out.

A prompt carries an image as an OpenAI content part: ``{"type": "image_url", "image_url": {"url":
"data:image/png;base64,…", "detail": …}}`` (chat completions) or ``{"type": "input_image", "image_url": "data:…"}``
(responses). The model needs the bytes; nothing else does. So the store keeps each image once, by its SHA-256
(``images`` table), and every stored transcript holds a reference in their place,
``{"type": "image", "sha256": …, "mime": …, "bytes": N, "width": W, "height": H}``, which transcripts, diffs
and exports show as ``[image png 12.3 KB sha256:1a2b3c4d]``.

Decoding is checked here, with the standard library only: a PNG is read whole (every chunk's CRC, the pixel
data inflated to its exact size), JPEG, GIF and WebP by their headers and end markers. That is enough to refuse
what is not an image or was cut short before it costs a model call, and no imaging library joins the core for it.
``png_bytes`` writes the PNGs the generated visual benchmark draws.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

IMAGE_PART_TYPES = frozenset({"image_url", "input_image"})
"""Content parts that carry an image to a model: chat completions' and the Responses API's."""
REF_TYPE = "image"
"""The content part a stored transcript holds in an image's place."""
DATA_URL_MARK = "data:image/"
"""What every inline image's URL starts with: a row without it has no image to take out (one substring test)."""

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


class ImageError(ValueError):
    """An image that cannot be decoded: bad base64, not an image, or cut short."""


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """What is known of one image once decoded: its content hash, type and size."""

    sha256: str
    mime: str
    n_bytes: int
    width: int
    height: int

    def ref(self) -> dict[str, Any]:
        """The content part a stored transcript holds instead of the image."""
        return {"type": REF_TYPE, "sha256": self.sha256, "mime": self.mime, "bytes": self.n_bytes,
                "width": self.width, "height": self.height}


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def decode_data_url(url: str) -> tuple[str, bytes]:
    """``(declared mime, bytes)`` of a base64 ``data:image/…`` URL; ``ImageError`` otherwise."""
    if not url.startswith(DATA_URL_MARK):
        raise ImageError(f"not an inline image (expected a data:image/…;base64 URL, got {url[:40]!r})")
    header, sep, payload = url.partition(",")
    if not sep or not header.endswith(";base64"):
        raise ImageError("an image data URL must be base64 (data:image/…;base64,…)")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageError(f"bad base64 in an image data URL ({exc})") from None
    return header[len("data:"):-len(";base64")], data


def inspect_image(data: bytes) -> ImageInfo:
    """Decode ``data`` far enough to know it is a whole image; its hash, type and size."""
    if data.startswith(_PNG_SIGNATURE):
        mime, (width, height) = "image/png", _png_size(data)
    elif data.startswith(b"\xff\xd8\xff"):
        mime, (width, height) = "image/jpeg", _jpeg_size(data)
    elif data[:6] in (b"GIF87a", b"GIF89a"):
        mime, (width, height) = "image/gif", _gif_size(data)
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        mime, (width, height) = "image/webp", _webp_size(data)
    else:
        raise ImageError(f"not an image (PNG, JPEG, GIF or WebP): it starts {data[:8]!r}")
    if width < 1 or height < 1:
        raise ImageError(f"an image of {width}x{height} pixels")
    return ImageInfo(hashlib.sha256(data).hexdigest(), mime, len(data), width, height)


def _png_size(data: bytes) -> tuple[int, int]:
    pos, idat, header = 8, [], None
    while True:
        if pos + 8 > len(data):
            raise ImageError("a PNG cut short (no IEND chunk)")
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc = data[pos + 8 + length:pos + 12 + length]
        if len(body) < length or len(crc) < 4:
            raise ImageError(f"a PNG cut short (in its {kind.decode('latin-1')} chunk)")
        if zlib.crc32(kind + body) != struct.unpack(">I", crc)[0]:
            raise ImageError(f"a damaged PNG (bad CRC in its {kind.decode('latin-1')} chunk)")
        if header is None and kind != b"IHDR":
            raise ImageError("a damaged PNG (IHDR is not its first chunk)")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    if colour not in _PNG_CHANNELS:
        raise ImageError(f"a damaged PNG (colour type {colour})")
    try:
        pixels = zlib.decompress(b"".join(idat))
    except zlib.error as exc:
        raise ImageError(f"a damaged PNG (its pixel data does not inflate: {exc})") from None
    if not interlace and len(pixels) != height * (1 + (width * _PNG_CHANNELS[colour] * depth + 7) // 8):
        raise ImageError(f"a damaged PNG ({len(pixels)} bytes of pixel data for {width}x{height})")
    return width, height


def _jpeg_size(data: bytes) -> tuple[int, int]:
    if not data.rstrip(b"\x00").endswith(b"\xff\xd9"):
        raise ImageError("a JPEG cut short (no end-of-image marker)")
    pos = 2
    while pos + 9 < len(data):
        if data[pos] != 0xFF:
            raise ImageError("a damaged JPEG (a segment does not start with 0xFF)")
        marker = data[pos + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[pos + 5:pos + 9])
            return width, height
        pos += 2 + struct.unpack(">H", data[pos + 2:pos + 4])[0]
    raise ImageError("a damaged JPEG (no frame header)")


def _gif_size(data: bytes) -> tuple[int, int]:
    if len(data) < 14 or not data.endswith(b"\x3b"):
        raise ImageError("a GIF cut short (no trailer)")
    width, height = struct.unpack("<HH", data[6:10])
    return width, height


def _webp_size(data: bytes) -> tuple[int, int]:
    if struct.unpack("<I", data[4:8])[0] + 8 > len(data) or len(data) < 30:
        raise ImageError("a WebP cut short")
    kind = data[12:16]
    if kind == b"VP8X":
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if kind == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if kind == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    raise ImageError(f"a damaged WebP (chunk {kind!r})")


def png_bytes(width: int, height: int, rgb: bytes) -> bytes:
    """A PNG of ``rgb`` (rows of ``width`` RGB triples, top to bottom), byte for byte the same every time."""
    if len(rgb) != width * height * 3:
        raise ValueError(f"expected {width * height * 3} bytes of RGB, got {len(rgb)}")
    stride = width * 3
    raw = b"".join(b"\x00" + rgb[y * stride:(y + 1) * stride] for y in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (_PNG_SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


# ---- content parts -------------------------------------------------------------------------------------------
def part_url(part: Mapping[str, Any]) -> str | None:
    """The image URL of a content part (either protocol's form), or ``None`` for a part without one."""
    if part.get("type") not in IMAGE_PART_TYPES:
        return None
    value = part.get("image_url")
    url = value.get("url") if isinstance(value, Mapping) else value
    return url if isinstance(url, str) else None


def image_parts(messages: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Every image-carrying content part of ``messages``, in order."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and part.get("type") in IMAGE_PART_TYPES:
                    yield part


def has_images(messages: Iterable[Mapping[str, Any]]) -> bool:
    return next(image_parts(messages), None) is not None


def check_images(messages: Iterable[Mapping[str, Any]]) -> str | None:
    """Why an image of ``messages`` cannot be sent (the first one that cannot be decoded), else ``None``.
    An ``http(s)`` URL is the server's to fetch, not ours to check."""
    for n, part in enumerate(image_parts(messages), start=1):
        url = part_url(part)
        if url is None:
            return f"image {n}: a content part without an image URL"
        if url.startswith(("http://", "https://")):
            continue
        try:
            decode_image_url(url)
        except ImageError as exc:
            return f"image {n}: {exc}"
    return None


@lru_cache(maxsize=64)
def _decoded(url: str) -> tuple[ImageInfo, bytes] | str:
    try:
        data = decode_data_url(url)[1]
        return inspect_image(data), data
    except ImageError as exc:
        return str(exc)


def decode_image_url(url: str) -> tuple[ImageInfo, bytes]:
    """The image of a ``data:image/…`` URL, checked whole, and its bytes; ``ImageError`` when it does not decode.

    Remembered for the last few URLs: every repeat of a task sends the same picture, and is checked before it is
    sent and again when its step is stored; inflating a large PNG each time would cost more than the request."""
    found = _decoded(url)
    if isinstance(found, str):
        raise ImageError(found)
    return found


def externalize(messages: list[Any]) -> tuple[list[Any], dict[str, bytes]]:
    """``messages`` with each inline image replaced by its reference, and the images by hash.

    An image that cannot be decoded becomes ``{"type": "image", "error": …, "bytes": N}``: the reason stays in the
    transcript, the undecodable bytes do not."""
    images: dict[str, bytes] = {}
    out: list[Any] = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            out.append(message)
            continue
        parts = []
        for part in content:
            url = part_url(part) if isinstance(part, Mapping) else None
            if url is None or not url.startswith(DATA_URL_MARK):
                parts.append(part)
                continue
            try:
                info, data = decode_image_url(url)
            except ImageError as exc:
                parts.append({"type": REF_TYPE, "error": str(exc), "bytes": len(url)})
                continue
            images[info.sha256] = data
            ref = info.ref()
            detail = _detail_of(part)
            if detail is not None:
                ref["detail"] = detail
            parts.append(ref)
        out.append({**message, "content": parts})
    return out, images


def _detail_of(part: Mapping[str, Any]) -> str | None:
    value = part.get("image_url")
    detail = value.get("detail") if isinstance(value, Mapping) else part.get("detail")
    return detail if isinstance(detail, str) else None


# ---- showing them ----------------------------------------------------------------------------------------------
def human_size(n_bytes: int) -> str:
    if n_bytes < 1024:
        return f"{n_bytes} B"
    if n_bytes < 1024 * 1024:
        return f"{n_bytes / 1024:.1f} KB"
    return f"{n_bytes / (1024 * 1024):.1f} MB"


def is_image(part: Any) -> bool:
    """Whether a content part is an image: one sent (either protocol's form) or a stored reference."""
    return isinstance(part, Mapping) and (part.get("type") in IMAGE_PART_TYPES or part.get("type") == REF_TYPE)


def placeholder(part: Mapping[str, Any]) -> str:
    """How a transcript shows an image: ``[image png 12.3 KB sha256:1a2b3c4d]`` (or why it could not be read)."""
    if part.get("error"):
        return f"[image not decodable: {part['error']}]"
    if part.get("type") == REF_TYPE:
        kind = str(part.get("mime", "image/?")).split("/", 1)[-1]
        return f"[image {kind} {human_size(int(part.get('bytes') or 0))} sha256:{str(part.get('sha256', ''))[:8]}]"
    url = part_url(part)
    if not url:
        return "[image without a URL]"
    if url.startswith(DATA_URL_MARK):  # not stored yet (a live transcript): the same placeholder, from the bytes
        try:
            return placeholder(decode_image_url(url)[0].ref())
        except ImageError as exc:
            return f"[image not decodable: {exc}]"
    return f"[image {url[:80]}]"
