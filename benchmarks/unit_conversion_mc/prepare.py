"""Generate ``data.jsonl``: multiple-choice unit-conversion questions, deterministically.

Run ``python benchmarks/unit_conversion_mc/prepare.py`` (no arguments, no network): it
rewrites ``data.jsonl`` next to this file byte for byte the same every time, because every
choice comes from ``random.Random(SEED)`` and every value is an exact ``Fraction`` printed
through ``Decimal``.

Each question converts a value between two units; the four options hold the right value and
three plausible wrong ones: the right value ten or a hundred times too big or too small, the
conversion inverted (dividing instead of multiplying), or, for temperatures, a formula with a
step left out.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from pathlib import Path

SEED = 20240601
N_LINEAR = 180
LETTERS = "ABCD"
OUT = Path(__file__).with_name("data.jsonl")

F = Fraction
# (category, from unit (singular, plural), to unit (singular, plural), how many `to` make one `from`)
LINEAR: list[tuple[str, tuple[str, str], tuple[str, str], Fraction]] = [
    ("length", ("kilometre", "kilometres"), ("metre", "metres"), F(1000)),
    ("length", ("metre", "metres"), ("centimetre", "centimetres"), F(100)),
    ("length", ("centimetre", "centimetres"), ("millimetre", "millimetres"), F(10)),
    ("length", ("metre", "metres"), ("millimetre", "millimetres"), F(1000)),
    ("length", ("inch", "inches"), ("centimetre", "centimetres"), F("2.54")),
    ("length", ("foot", "feet"), ("inch", "inches"), F(12)),
    ("length", ("yard", "yards"), ("foot", "feet"), F(3)),
    ("length", ("mile", "miles"), ("kilometre", "kilometres"), F("1.609344")),
    ("length", ("mile", "miles"), ("yard", "yards"), F(1760)),
    ("length", ("foot", "feet"), ("centimetre", "centimetres"), F("30.48")),
    ("mass", ("kilogram", "kilograms"), ("gram", "grams"), F(1000)),
    ("mass", ("gram", "grams"), ("milligram", "milligrams"), F(1000)),
    ("mass", ("tonne", "tonnes"), ("kilogram", "kilograms"), F(1000)),
    ("mass", ("pound", "pounds"), ("ounce", "ounces"), F(16)),
    ("mass", ("pound", "pounds"), ("kilogram", "kilograms"), F("0.45359237")),
    ("mass", ("stone", "stone"), ("pound", "pounds"), F(14)),
    ("time", ("hour", "hours"), ("minute", "minutes"), F(60)),
    ("time", ("minute", "minutes"), ("second", "seconds"), F(60)),
    ("time", ("day", "days"), ("hour", "hours"), F(24)),
    ("time", ("week", "weeks"), ("day", "days"), F(7)),
    ("time", ("hour", "hours"), ("second", "seconds"), F(3600)),
    ("time", ("day", "days"), ("minute", "minutes"), F(1440)),
    ("volume", ("litre", "litres"), ("millilitre", "millilitres"), F(1000)),
    ("volume", ("cubic metre", "cubic metres"), ("litre", "litres"), F(1000)),
    ("volume", ("US gallon", "US gallons"), ("litre", "litres"), F("3.785411784")),
    ("volume", ("tablespoon", "tablespoons"), ("teaspoon", "teaspoons"), F(3)),
    ("volume", ("US gallon", "US gallons"), ("US quart", "US quarts"), F(4)),
    ("volume", ("US quart", "US quarts"), ("US pint", "US pints"), F(2)),
    ("area", ("square metre", "square metres"), ("square centimetre", "square centimetres"), F(10000)),
    ("area", ("hectare", "hectares"), ("square metre", "square metres"), F(10000)),
    ("area", ("square kilometre", "square kilometres"), ("hectare", "hectares"), F(100)),
    ("speed", ("metre per second", "metres per second"), ("kilometre per hour", "kilometres per hour"), F("3.6")),
    ("data", ("byte", "bytes"), ("bit", "bits"), F(8)),
    ("data", ("kibibyte", "kibibytes"), ("byte", "bytes"), F(1024)),
    ("energy", ("kilocalorie", "kilocalories"), ("kilojoule", "kilojoules"), F("4.184")),
    ("pressure", ("atmosphere", "atmospheres"), ("kilopascal", "kilopascals"), F("101.325")),
]
VALUES = [F(v) for v in ("1", "2", "2.5", "3", "4", "5", "6", "7.5", "8", "9", "12", "15", "20", "25", "40", "75")]
TEMPERATURE_VALUES = [F(v) for v in range(-40, 121, 5)]
TEMPLATES = (
    "How many {to_plural} are there in {value} {from_name}?",
    "Convert {value} {from_name} to {to_plural}.",
    "{value} {from_name} is equal to how many {to_plural}?",
)


def fmt(value: Fraction) -> str:
    """``value`` to at most six significant digits, without trailing zeros or exponent."""
    if value == 0:
        return "0"
    with localcontext() as ctx:
        ctx.prec = 28
        d = Decimal(value.numerator) / Decimal(value.denominator)
        digits = d.adjusted() + 1  # digits before the point
        d = d.quantize(Decimal(1).scaleb(min(0, digits - 6)), rounding=ROUND_HALF_EVEN)
    text = format(d.normalize(), "f")
    return "0" if text == "-0" else text


def linear_question(rng: random.Random) -> dict[str, object]:
    category, (from_one, from_many), (to_one, to_many), factor = rng.choice(LINEAR)
    if rng.random() < 0.35:  # the reverse direction: divide
        (from_one, from_many, to_one, to_many), factor = (to_one, to_many, from_one, from_many), 1 / factor
    value = rng.choice(VALUES)
    right = value * factor
    wrong = [right * 10, right / 10, value / factor, right * 100, right / 100]
    question = rng.choice(TEMPLATES).format(
        value=fmt(value), from_name=from_one if value == 1 else from_many, to_plural=to_many
    )
    return _item(rng, category, question, right, wrong[:3] if rng.random() < 0.5 else wrong, (to_one, to_many))


_TEMPERATURE: list[tuple[str, str, Callable[[Fraction], list[Fraction]]]] = [
    # (from, to, value -> [right, wrong...]): formulas with one step wrong or left out
    ("°C", "°F", lambda c: [c * F(9, 5) + 32, c * F(9, 5), c * F(5, 9) + 32, (c + 32) * F(9, 5)]),
    ("°F", "°C", lambda f: [(f - 32) * F(5, 9), f * F(5, 9) - 32, (f - 32) * F(9, 5), f - 32]),
    ("°C", "K", lambda c: [c + F("273.15"), c - F("273.15"), c + 373, c + 173]),
    ("K", "°C", lambda k: [k - F("273.15"), k + F("273.15"), k - 373, k - 173]),
]


def temperature_question(rng: random.Random) -> dict[str, object]:
    unit_from, unit_to, formula = rng.choice(_TEMPERATURE)
    value = rng.choice(TEMPERATURE_VALUES)
    if unit_from == "K":
        value += 273
    right, *wrong = formula(value)
    name = {"°F": "degrees Fahrenheit", "°C": "degrees Celsius", "K": "kelvin"}[unit_to]
    question = f"What is {fmt(value)} {unit_from} in {name}?"
    return _item(rng, "temperature", question, right, [*wrong, right + 10, right - 10], (unit_to, unit_to))


def _item(
    rng: random.Random, category: str, question: str, right: Fraction, wrong: list[Fraction], unit: tuple[str, str]
) -> dict[str, object]:
    right_text = _with_unit(right, unit)
    options = [right_text]
    for value in wrong:
        text = _with_unit(value, unit)
        if text not in options:
            options.append(text)
        if len(options) == 4:
            break
    if len(options) < 4:
        raise ValueError(f"too few distinct options for {question!r}")
    distractors = options[1:]
    rng.shuffle(distractors)
    position = rng.randrange(4)
    choices = [*distractors[:position], right_text, *distractors[position:]]
    return {
        "category": category,
        "question": question,
        "choices": choices,
        "choices_text": "\n".join(f"({letter}) {text}" for letter, text in zip(LETTERS, choices, strict=True)),
        "answer": LETTERS[position],
    }


def _with_unit(value: Fraction, unit: tuple[str, str]) -> str:
    """``value`` printed with the singular unit when it reads "1", else the plural."""
    text = fmt(value)
    return f"{text} {unit[0] if text == '1' else unit[1]}"


def generate() -> list[dict[str, object]]:
    rng = random.Random(SEED)
    items: list[dict[str, object]] = []
    seen: set[str] = set()
    while len(items) < N_LINEAR + 40:
        item = linear_question(rng) if len(items) < N_LINEAR else temperature_question(rng)
        if item["question"] in seen:
            continue
        seen.add(str(item["question"]))
        items.append({"id": f"ucmc-{len(items):04d}", **item})
    return items


def render(items: list[dict[str, object]]) -> bytes:
    return "".join(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n" for item in items).encode("utf-8")


def main() -> None:
    OUT.write_bytes(render(generate()))


if __name__ == "__main__":
    main()
