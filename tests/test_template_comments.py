"""No template comment that Django would print: {# #} is one line only.

A `{# ... #}` spread over lines is not a comment to Django's lexer: the page
shows it as text (the staff endpoint page did). Multi-line comments are
`{% comment %}...{% endcomment %}`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".venv", "node_modules", "bench", "test-output", ".git"}
# The lexer's own rule (django.template.base.tag_re): {# then anything but a
# newline, up to #}. An opening with no closing on its line is printed.
ONE_LINE = re.compile(r"\{#.*?#\}")


def templates() -> list[Path]:
    return [
        path
        for path in ROOT.rglob("templates/**/*")
        if path.is_file()
        and path.suffix in (".html", ".txt")
        and not SKIP & set(path.relative_to(ROOT).parts)
    ]


def open_comments(text: str) -> list[int]:
    """Line numbers where a {# is not closed on its own line."""
    return [
        n
        for n, line in enumerate(text.splitlines(), 1)
        if "{#" in ONE_LINE.sub("", line)
    ]


def test_the_scan_finds_a_comment_spread_over_lines():
    assert open_comments("{# one line #}\n<p>{# two\n lines #}</p>") == [2]


def test_no_template_has_a_multi_line_hash_comment():
    found = templates()
    assert any(p.name == "endpoint_change_form.html" for p in found)
    bad = {
        str(p.relative_to(ROOT)): lines
        for p in found
        if (lines := open_comments(p.read_text()))
    }
    assert not bad, bad
