"""Markdown text helpers shared by the diagnosis report and the exported run reports (``workbench.export``)."""

from __future__ import annotations

import re

_MD_SPECIAL = re.compile(r"([\\`*|~])")
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # mid-word _ never emphasises


def md_escape(text: str) -> str:
    """Text safe in a markdown table cell: no emphasis, links, code, HTML or column breaks. Brackets stay
    as they are (``[0.51, 0.74]`` reads better) but ``](`` is broken up, so no link can form."""
    text = _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))
    text = _MD_UNDERSCORE.sub(r"\\_", text).replace("](", "]\\(")
    return text.replace("<", "&lt;").replace(">", "&gt;")
