"""The mock model's replies to IFEval prompts: text that follows the prompt's instructions, or breaks one.

A right reply is built from the instructions and their arguments (the task's expected answer, as
``workbench.catalogue.ifeval`` writes it): plain English sentences arranged into the paragraphs, sections, bullets
and highlights asked for, padded or trimmed to the word and sentence counts, then wrapped as asked (a title, a
postscript, an end phrase, quotation marks, JSON, a case). A wrong reply is the right one with the first
instruction broken (``_BREAK``), or an empty reply. Instructions with no generator here (``language:
response_language`` beyond English) are left to chance: the checkers, not the mock, decide the score.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

SENTENCES: tuple[str, ...] = (
    "The plan works because each step is simple and clear.",
    "We check every part with care so the result stays useful.",
    "This answer keeps the main idea short and direct.",
    "Good notes help the reader follow the whole story.",
    "Small details matter when you want a solid result.",
    "Time spent on the basics pays off later on.",
)
LESS, AT_LEAST = "less than", "at least"


@dataclass
class _Reply:
    """What the instructions ask for, gathered before the text is assembled."""

    paragraphs: int = 1
    separator: str = "\n\n"
    first_word: tuple[int, str] | None = None
    sentences: tuple[str, int] | None = None
    words: tuple[str, int] | None = None
    extra: list[str] = field(default_factory=list)
    """Words or phrases the body must contain (keywords, placeholders, highlights, capitals)."""
    avoid: set[str] = field(default_factory=set)
    """Words the body must not contain, and letters (one character) to keep rare."""
    bullets: int = 0
    sections: tuple[str, int] | None = None
    title: bool = False
    choice_phrase: str | None = None
    postscript: str | None = None
    end_phrase: str | None = None
    repeat: str | None = None
    two: bool = False
    quote: bool = False
    json: bool = False
    case: str | None = None


def _kw(kwargs: dict[str, Any], key: str, default: Any = None) -> Any:
    value = kwargs.get(key)
    return default if value is None else value


def _gather(ids: list[str], kwargs: list[dict[str, Any]]) -> _Reply:
    r = _Reply()
    for iid, kw in zip(ids, kwargs, strict=True):
        kind = iid.split(":", 1)[1]
        if kind == "existence":
            r.extra += [str(k) for k in _kw(kw, "keywords", [])]
        elif kind == "frequency":
            n, rel = int(_kw(kw, "frequency", 1)), _kw(kw, "relation", AT_LEAST)
            r.extra += [str(kw["keyword"])] * (n if rel == AT_LEAST else max(0, n - 1))
        elif kind == "forbidden_words":
            r.avoid |= {str(w).lower() for w in _kw(kw, "forbidden_words", [])}
        elif kind == "letter_frequency":
            letter, n = str(kw["letter"]).lower(), int(kw["let_frequency"])
            if _kw(kw, "let_relation", AT_LEAST) == AT_LEAST:
                r.extra.append(letter * n)
            else:
                r.avoid.add(letter)
        elif kind == "number_sentences":
            r.sentences = (_kw(kw, "relation", AT_LEAST), int(kw["num_sentences"]))
        elif kind == "number_words":
            r.words = (_kw(kw, "relation", AT_LEAST), int(kw["num_words"]))
        elif kind == "number_paragraphs":
            r.paragraphs, r.separator = int(kw["num_paragraphs"]), "\n***\n"
        elif kind == "nth_paragraph_first_word":
            r.paragraphs = int(kw["num_paragraphs"])
            if kw.get("first_word"):
                r.first_word = (int(_kw(kw, "nth_paragraph", 1)), str(kw["first_word"]))
        elif kind == "number_placeholders":
            r.extra += [f"[detail {i + 1}]" for i in range(int(kw["num_placeholders"]))]
        elif kind == "postscript":
            r.postscript = str(_kw(kw, "postscript_marker", "P.S."))
        elif kind == "number_bullet_lists":
            r.bullets = int(kw["num_bullets"])
        elif kind == "constrained_response":
            r.choice_phrase = "My answer is yes."
        elif kind == "number_highlighted_sections":
            r.extra += [f"*key point {i + 1}*" for i in range(int(kw["num_highlights"]))]
        elif kind == "multiple_sections":
            r.sections = (str(_kw(kw, "section_spliter", "Section")), int(kw["num_sections"]))
        elif kind == "json_format":
            r.json = True
        elif kind == "title":
            r.title = True
        elif kind == "two_responses":
            r.two = True
        elif kind == "repeat_prompt":
            r.repeat = str(kw["prompt_to_repeat"])
        elif kind == "end_checker":
            r.end_phrase = str(kw["end_phrase"])
        elif kind == "capital_word_frequency":
            n, rel = int(kw["capital_frequency"]), _kw(kw, "capital_relation", AT_LEAST)
            r.extra += ["NOTE"] * (n if rel == AT_LEAST else 0)
        elif kind in ("english_capital", "english_lowercase"):
            r.case = kind
        elif kind == "quotation":
            r.quote = True
    return r


def _sentences(r: _Reply) -> list[str]:
    """Filler sentences free of what must be avoided (a letter kept rare drops every word holding it)."""
    out = []
    for s in SENTENCES:
        words = [w for w in s.rstrip(".").split() if w.lower() not in r.avoid and not (set(w.lower()) & r.avoid)]
        if words:
            out.append(" ".join(words).capitalize() + ".")
    return out or ["Yes."]


def _body(r: _Reply, per_paragraph: int) -> str:
    pool = _sentences(r)
    paragraphs: list[str] = []
    extras = list(r.extra)
    for p in range(r.paragraphs):
        chosen = [pool[(p * per_paragraph + i) % len(pool)] for i in range(per_paragraph)]
        if p == 0 and extras:
            chosen.insert(0, "Key words: " + " ".join(extras) + ".")
        if r.first_word is not None and p + 1 == r.first_word[0]:
            chosen[0] = f"{r.first_word[1]} {chosen[0][0].lower()}{chosen[0][1:]}"
        paragraphs.append(" ".join(chosen))
    if r.bullets:
        paragraphs[-1] += "\n" + "\n".join(f"* Point {i + 1} is covered." for i in range(r.bullets))
    if r.sections is not None:
        name, n = r.sections
        paragraphs = [f"{name} {i + 1}\n{paragraphs[i % len(paragraphs)]}" for i in range(n)]
    return r.separator.join(paragraphs)


def _wrap(r: _Reply, body: str) -> str:
    text = body
    if r.title:
        text = f"<<A Short Answer>>\n{text}"
    if r.choice_phrase:
        text = f"{text}\n{r.choice_phrase}"
    if r.two:
        text = f"{text}\n******\n{text.replace('The ', 'A ', 1)} Another view."
    if r.repeat is not None:
        text = f"{r.repeat}\n{text}"
    if r.postscript:
        text = f"{text}\n\n{r.postscript} Thank you for reading."
    if r.end_phrase:
        text = f"{text}\n{r.end_phrase}"
    if r.case == "english_capital":
        text = text.upper()
    elif r.case == "english_lowercase":
        text = text.lower()
    if r.json:
        text = orjson.dumps({"answer": text}).decode()
    if r.quote:
        text = f'"{text}"'
    return text


def _count_words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def _count_sentences(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text))


def _fits(r: _Reply, text: str) -> bool | None:
    """True when the counts fit, False when more text is needed, None when there is already too much."""
    for want, count in ((r.words, _count_words), (r.sentences, _count_sentences)):
        if want is None:
            continue
        relation, n = want
        have = count(text)
        if relation == AT_LEAST and have < n:
            return False
        if relation == LESS and have >= n:
            return None
    return True


def right_reply(instructions: str) -> str:
    """A reply that follows every instruction in ``instructions`` (the frozen row's JSON) that the mock knows."""
    spec = orjson.loads(instructions)
    r = _gather(spec["instruction_id_list"], spec["kwargs"])
    per_paragraph = 1
    text = _wrap(r, _body(r, per_paragraph))
    while _fits(r, text) is False and per_paragraph < 400:
        per_paragraph += 1
        text = _wrap(r, _body(r, per_paragraph))
    return text


def _drop(pattern: str, flags: int = re.IGNORECASE) -> Callable[[str, dict[str, Any]], str]:
    return lambda text, kw: re.sub(pattern, "", text, flags=flags)


def _keywords_out(text: str, kw: dict[str, Any]) -> str:
    for word in [*(kw.get("keywords") or []), *([kw["keyword"]] if kw.get("keyword") else [])]:
        text = re.sub(re.escape(str(word)), "item", text, flags=re.IGNORECASE)
    return text


def _frequency(text: str, kw: dict[str, Any]) -> str:
    if kw.get("relation", AT_LEAST) == AT_LEAST:
        return _keywords_out(text, kw)
    return f"{text} " + " ".join([str(kw["keyword"])] * int(kw["frequency"]))


def _letters(text: str, kw: dict[str, Any]) -> str:
    letter = str(kw["letter"])
    if kw.get("let_relation", AT_LEAST) == AT_LEAST:
        return re.sub(re.escape(letter), "", text, flags=re.IGNORECASE)
    return f"{text} {letter * int(kw['let_frequency'])}"


def _count(unit: str, key: str) -> Callable[[str, dict[str, Any]], str]:
    def broken(text: str, kw: dict[str, Any]) -> str:
        if kw.get("relation", AT_LEAST) == AT_LEAST:
            return "Short"
        return " ".join([SENTENCES[0]] * (int(kw[key]) + 1))

    return broken


_BREAK: dict[str, Callable[[str, dict[str, Any]], str]] = {
    "punctuation:no_comma": lambda text, kw: f"{text} Yes, indeed.",
    "keywords:existence": _keywords_out,
    "keywords:frequency": _frequency,
    "keywords:forbidden_words": lambda text, kw: f"{text} " + " ".join(map(str, kw["forbidden_words"])),
    "keywords:letter_frequency": _letters,
    "length_constraints:number_words": _count("words", "num_words"),
    "length_constraints:number_sentences": _count("sentences", "num_sentences"),
    "length_constraints:number_paragraphs": lambda text, kw: text.replace("***", ""),
    "length_constraints:nth_paragraph_first_word": lambda text, kw: re.sub(r"\n\n", " ", text),
    "detectable_content:number_placeholders": lambda text, kw: text.replace("[", "").replace("]", ""),
    "detectable_content:postscript": lambda text, kw: text.replace(str(kw.get("postscript_marker", "P.S.")), ""),
    "detectable_format:number_bullet_lists": lambda text, kw: f"{text}\n* One more point.",
    "detectable_format:constrained_response": _drop(r"My answer is (yes|no|maybe)\."),
    "detectable_format:number_highlighted_sections": lambda text, kw: text.replace("*", ""),
    "detectable_format:multiple_sections": lambda text, kw: text.replace(str(kw.get("section_spliter", "")), "Part"),
    "detectable_format:json_format": lambda text, kw: f"Here is the JSON: {text}",
    "detectable_format:title": lambda text, kw: text.replace("<<", "").replace(">>", ""),
    "combination:two_responses": lambda text, kw: text.replace("******", ""),
    "combination:repeat_prompt": lambda text, kw: f"Sure. {text}",
    "startend:end_checker": lambda text, kw: f"{text} Thanks.",
    "change_case:capital_word_frequency": lambda text, kw: (
        text.lower() if kw.get("capital_relation", AT_LEAST) == AT_LEAST
        else f"{text} " + " ".join(["NOTE"] * int(kw["capital_frequency"]))),
    "change_case:english_capital": lambda text, kw: text.lower(),
    "change_case:english_lowercase": lambda text, kw: text.upper(),
    "startend:quotation": lambda text, kw: text.strip('"'),
}


def wrong_reply(instructions: str, choice: int) -> str:
    """The right reply with its first instruction broken; an empty reply now and then."""
    spec = orjson.loads(instructions)
    breaker = _BREAK.get(spec["instruction_id_list"][0])
    if breaker is None or (choice >> 8) % 20 == 0:
        return ""
    return breaker(right_reply(instructions), spec["kwargs"][0])
