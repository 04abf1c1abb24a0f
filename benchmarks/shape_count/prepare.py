"""Generate ``data.jsonl``: pictures of coloured shapes, and how many of one kind each holds.

Run ``python benchmarks/shape_count/prepare.py`` (no arguments, no network): it rewrites ``data.jsonl`` next to
this file byte for byte the same every time. Every choice comes from ``random.Random(SEED)``; the pictures are
drawn pixel by pixel and written as PNG with ``zlib`` (``workbench.images.png_bytes``), so no imaging library is
needed and no library version can change a byte.

Each picture is 96x96 pixels on white: between one and five shapes of the asked kind (a colour and a form: circle,
square or triangle) among up to four others that differ in colour, form or both, none overlapping. The row holds
the picture as base64 (``image``), the question, the count (``answer``), the form (``category``) and the colour.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

from workbench.images import png_bytes

SEED = 20261124
N_ROWS = 60
SIZE = 96
CELL = 24  # the picture is a 4x4 grid of cells; each shape sits inside its own cell, so none overlap
OUT = Path(__file__).with_name("data.jsonl")
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40), "green": (40, 160, 60), "blue": (40, 80, 220), "yellow": (230, 200, 30),
}
FORMS = ("circle", "square", "triangle")


def inside(form: str, x: int, y: int, cx: int, cy: int, r: int) -> bool:
    """Whether pixel (x, y) is inside a ``form`` of radius ``r`` centred on (cx, cy)."""
    dx, dy = x - cx, y - cy
    if form == "circle":
        return dx * dx + dy * dy <= r * r
    if form == "square":
        return abs(dx) <= r and abs(dy) <= r
    # an upward triangle: apex at the top, base at the bottom
    return -r <= dy <= r and abs(dx) * 2 <= (dy + r)


def draw(shapes: list[tuple[str, str, int, int, int]]) -> bytes:
    pixels = bytearray(b"\xff" * (SIZE * SIZE * 3))
    for form, colour, cx, cy, r in shapes:
        rgb = bytes(COLOURS[colour])
        for y in range(cy - r, cy + r + 1):
            for x in range(cx - r, cx + r + 1):
                if inside(form, x, y, cx, cy, r):
                    at = (y * SIZE + x) * 3
                    pixels[at:at + 3] = rgb
    return png_bytes(SIZE, SIZE, bytes(pixels))


def row(rng: random.Random, i: int) -> dict[str, object]:
    form, colour = rng.choice(FORMS), rng.choice(sorted(COLOURS))
    count = rng.randint(1, 5)
    others = [(f, c) for f in FORMS for c in sorted(COLOURS) if (f, c) != (form, colour)]
    kinds = [(form, colour)] * count + [rng.choice(others) for _ in range(rng.randint(0, 4))]
    cells = rng.sample(range((SIZE // CELL) ** 2), len(kinds))
    shapes = []
    for (f, c), cell in zip(kinds, cells, strict=True):
        r = rng.randint(6, 9)
        cx = (cell % 4) * CELL + CELL // 2 + rng.randint(-2, 2)
        cy = (cell // 4) * CELL + CELL // 2 + rng.randint(-2, 2)
        shapes.append((f, c, cx, cy, r))
    return {
        "id": f"shape-{i:04d}",
        "question": f"How many {colour} {form}s are in the picture?",
        "answer": str(count),
        "category": form,
        "colour": colour,
        "image": base64.b64encode(draw(shapes)).decode("ascii"),
    }


def main() -> None:
    rng = random.Random(SEED)
    with OUT.open("w", encoding="utf-8") as out:
        for i in range(N_ROWS):
            out.write(json.dumps(row(rng, i), sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
