"""Generate ``data.jsonl``: short-answer questions about chemical element symbols, deterministically.

Run ``python benchmarks/element_symbols_qa/prepare.py`` (no arguments, no network): it rewrites
``data.jsonl`` next to this file byte for byte the same every time. The table below (atomic
number, symbol, IUPAC English name) was written for this project; facts are not copyrightable.
Every element gives two questions, one each way: name -> symbol and symbol -> name. The order
of the questions is shuffled with ``random.Random(SEED)``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 118
OUT = Path(__file__).with_name("data.jsonl")

ELEMENTS = """
H Hydrogen|He Helium|Li Lithium|Be Beryllium|B Boron|C Carbon|N Nitrogen|O Oxygen|F Fluorine|Ne Neon|
Na Sodium|Mg Magnesium|Al Aluminium|Si Silicon|P Phosphorus|S Sulfur|Cl Chlorine|Ar Argon|K Potassium|
Ca Calcium|Sc Scandium|Ti Titanium|V Vanadium|Cr Chromium|Mn Manganese|Fe Iron|Co Cobalt|Ni Nickel|
Cu Copper|Zn Zinc|Ga Gallium|Ge Germanium|As Arsenic|Se Selenium|Br Bromine|Kr Krypton|Rb Rubidium|
Sr Strontium|Y Yttrium|Zr Zirconium|Nb Niobium|Mo Molybdenum|Tc Technetium|Ru Ruthenium|Rh Rhodium|
Pd Palladium|Ag Silver|Cd Cadmium|In Indium|Sn Tin|Sb Antimony|Te Tellurium|I Iodine|Xe Xenon|
Cs Caesium|Ba Barium|La Lanthanum|Ce Cerium|Pr Praseodymium|Nd Neodymium|Pm Promethium|Sm Samarium|
Eu Europium|Gd Gadolinium|Tb Terbium|Dy Dysprosium|Ho Holmium|Er Erbium|Tm Thulium|Yb Ytterbium|
Lu Lutetium|Hf Hafnium|Ta Tantalum|W Tungsten|Re Rhenium|Os Osmium|Ir Iridium|Pt Platinum|Au Gold|
Hg Mercury|Tl Thallium|Pb Lead|Bi Bismuth|Po Polonium|At Astatine|Rn Radon|Fr Francium|Ra Radium|
Ac Actinium|Th Thorium|Pa Protactinium|U Uranium|Np Neptunium|Pu Plutonium|Am Americium|Cm Curium|
Bk Berkelium|Cf Californium|Es Einsteinium|Fm Fermium|Md Mendelevium|No Nobelium|Lr Lawrencium|
Rf Rutherfordium|Db Dubnium|Sg Seaborgium|Bh Bohrium|Hs Hassium|Mt Meitnerium|Ds Darmstadtium|
Rg Roentgenium|Cn Copernicium|Nh Nihonium|Fl Flerovium|Mc Moscovium|Lv Livermorium|Ts Tennessine|Og Oganesson
"""


def elements() -> list[tuple[int, str, str]]:
    """(atomic number, symbol, name) for elements 1-118, in order."""
    pairs = [entry.split() for entry in ELEMENTS.replace("\n", "").split("|")]
    table = [(z, symbol, name) for z, (symbol, name) in enumerate(pairs, start=1)]
    if len(table) != 118 or len({s for _, s, _ in table}) != 118:
        raise ValueError("the element table must list 118 distinct elements")
    return table


def generate() -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    for z, symbol, name in elements():
        items.append(
            {
                "atomic_number": z,
                "direction": "name_to_symbol",
                "element": name,
                "question": f"What is the chemical symbol for {name.lower()}?",
                "answer": symbol,
            }
        )
        items.append(
            {
                "atomic_number": z,
                "direction": "symbol_to_name",
                "element": name,
                "question": f"Which element has the chemical symbol {symbol}?",
                "answer": name,
            }
        )
    random.Random(SEED).shuffle(items)
    return [{"id": f"esqa-{i:04d}", **item} for i, item in enumerate(items)]


def render(items: list[dict[str, object]]) -> bytes:
    return "".join(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n" for item in items).encode("utf-8")


def main() -> None:
    OUT.write_bytes(render(generate()))


if __name__ == "__main__":
    main()
