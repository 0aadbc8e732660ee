"""A regex that guards input matches the whole value: re.fullmatch, or a
pattern ending in \\Z. With re.match or re.search, a pattern ending in $ also
matches before a trailing newline, so "order.paid\\n" passed as an event type.

The scan reads every Python file the project ships (all but tests/, whose
searches of a process's output may mean "end of a line" by $) and names each
.match( or .search( call whose pattern, written in the call or compiled into
a name anywhere in it, ends in an unescaped $.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {".venv", ".git", "node_modules", "__pycache__", "tests"}
PARTIAL = {"match", "search"}  # fullmatch is the one that does not need \Z


def sources() -> list[Path]:
    found = []
    for child in sorted(ROOT.iterdir()):
        if child.name in SKIPPED or child.name.startswith("."):
            continue
        if child.is_dir():
            found += [
                p
                for p in child.rglob("*.py")
                if not SKIPPED & set(p.relative_to(ROOT).parts)
            ]
        elif child.suffix == ".py":
            found.append(child)
    return sorted(found)


def ends_in_dollar(pattern: str) -> bool:
    body = pattern.rstrip(")")  # "^(a|b)$" and "^(a|b$)" alike
    if not body.endswith("$"):
        return False
    escapes = len(body[:-1]) - len(body[:-1].rstrip("\\"))
    return escapes % 2 == 0  # r"\$" is a dollar sign, not the end


def _compiled_pattern(node: ast.AST) -> str | None:
    """The pattern of `re.compile("...")`, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "compile"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "re"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def compiled_names(tree: ast.AST) -> dict[str, str]:
    """Names (NAME = re.compile(...), self.name = ...) and their patterns."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            pattern = _compiled_pattern(node.value)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if pattern is not None and (name := _name_of(target)):
                    names[name] = pattern
    return names


def _called_pattern(call: ast.Call, compiled: dict[str, str], bare: set[str]):
    func = call.func
    first = call.args[0] if call.args else None
    literal = (
        first.value
        if isinstance(first, ast.Constant) and isinstance(first.value, str)
        else None
    )
    if isinstance(func, ast.Name) and func.id in bare:  # from re import match
        return literal
    if not isinstance(func, ast.Attribute) or func.attr not in PARTIAL:
        return None
    target = func.value
    if isinstance(target, ast.Name) and target.id == "re":
        return literal
    if (pattern := _compiled_pattern(target)) is not None:
        return pattern
    name = _name_of(target)
    return compiled.get(name) if name else None


def mistakes(text: str, where: str, compiled: dict[str, str]) -> list[str]:
    """'where:line: ...' for each partial match on a pattern ending in $."""
    tree = ast.parse(text)
    known = {**compiled, **compiled_names(tree)}
    bare = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "re"
        for alias in node.names
        if alias.name in PARTIAL
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            pattern = _called_pattern(node, known, bare)
            if pattern is not None and ends_in_dollar(pattern):
                found.append(
                    f"{where}:{node.lineno}: {ast.unparse(node.func)} on "
                    f"{pattern!r}; use fullmatch, or end the pattern in \\Z"
                )
    return found


def test_no_regex_is_matched_partially_on_a_pattern_ending_in_dollar():
    texts = {p.relative_to(ROOT).as_posix(): p.read_text() for p in sources()}
    assert "endpoints/matching.py" in texts, "the walk found the sources"
    compiled: dict[str, str] = {}
    for text in texts.values():
        compiled.update(compiled_names(ast.parse(text)))
    found = [
        m for where, text in texts.items() for m in mistakes(text, where, compiled)
    ]
    assert found == []


SAMPLE = r"""
import re
from re import search
NAME = re.compile(r"^[a-z]+$")
def check(value, other):
    NAME.match(value)
    re.match(r"^a$", value)
    re.compile("b$").search(value)
    search(r"c$", value)
    other.IMPORTED.match(value)
    re.match(r"^(a|b)$", value)
    NAME.fullmatch(value)
    re.match(r"^a\Z", value)
    re.match(r"costs \$", value)
    re.match(r"^a", value)
    re.fullmatch(r"^a$", value)
"""


def test_the_scan_names_each_shape_of_the_mistake_and_nothing_else():
    found = mistakes(SAMPLE, "sample.py", {"IMPORTED": "^x$"})
    assert [line.split(":")[1] for line in found] == ["6", "7", "8", "9", "10", "11"]
    assert found[0] == (
        "sample.py:6: NAME.match on '^[a-z]+$'; use fullmatch, or end the pattern in \\Z"
    )
