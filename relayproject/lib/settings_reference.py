"""What each setting means: the docs' settings table is made from this.

Two kinds of setting. A *relay* setting is one of the DEFAULTS of appsettings.py: the
standalone relay reads it from the environment, and a Django project that
installs the apps sets it as a Django setting of the same name or leaves it
at the default. A *process* setting is read from the environment by
relayproject/settings.py (or, for the few in ELSEWHERE, by the command that
starts a process) and matters to the standalone relay only: a project of
its own decides those in its own settings.

Defaults are never written here twice: a relay setting's comes from
DEFAULTS, a process setting's from the `default=` of its read in
settings.py. Only a default that is computed (a callable, None, an
expression) has words in DEFAULT_WORDS. The docs build
(docs/hooks.py) renders settings_markdown(); tests/relayproject/lib/
test_settings_reference.py fails when a setting has no meaning here, or a
meaning names no setting.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from relayproject.lib.appsettings import DEFAULTS
from relayproject.lib.settings_meanings import ELSEWHERE, MEANINGS

SETTINGS_FILE = Path(__file__).resolve().parents[1] / "settings.py"
# The readers of django-environ's Env that settings.py calls: env("X"),
# env.int("X"), env.email_url("X"), ...
ENV_NAME = "env"

# Words for defaults that are computed rather than written as a value.
DEFAULT_WORDS: dict[str, str] = {
    "SECRET_KEY": "a development key, which the relay refuses without `DEBUG`",
    "DATABASE_URL": "`sqlite:///<project>/db.sqlite3` (installed: `./db.sqlite3`)",
    "STATIC_ROOT": "`<project>/staticfiles` (installed: `./staticfiles`)",
    "EMAIL_URL": "`consolemail://` with `DEBUG`, else `smtp://localhost:25`",
    "CLAIM_LEASE_SECONDS": (
        "(ceil(`BATCH_SIZE` / `DISPATCHER_CONCURRENCY`) + 1) x "
        "`HTTP_TIMEOUT_SECONDS` + 60, at most max(600, 2 x "
        "`HTTP_TIMEOUT_SECONDS` + 60): 80 s at the defaults"
    ),
    "WORKER_ID": "`<hostname>-<pid>`",
    "RELAY_ENCRYPTION_KEYS": (
        "none (required without `DEBUG`); with `DEBUG`, a development key "
        "made from `SECRET_KEY`"
    ),
}


@dataclass(frozen=True)
class Row:
    name: str
    kind: str  # "relay" or "process"
    default: str
    meaning: str


def env_reads(source: str) -> dict[str, ast.expr | None]:
    """Each environment variable settings.py reads through `env`, in the
    order it reads them, with the expression of its `default=` (or None)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not _is_env_reader(node.func):
            continue
        if not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        name = node.args[0].value
        if isinstance(name, str):
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            found.append(((node.lineno, node.col_offset), name, default))
    # ast.walk is breadth-first: order them as they stand in the file.
    reads: dict[str, ast.expr | None] = {}
    for _position, name, default in sorted(found, key=lambda read: read[0]):
        reads.setdefault(name, default)
    return reads


def _is_env_reader(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id == ENV_NAME
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == ENV_NAME
    )


def value_words(value: object) -> str | None:
    """How a default value reads in the table; None when it takes words."""
    if value is None or callable(value):
        return None
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value in ("", []):
        return "empty"
    if isinstance(value, list):
        return "`" + ",".join(str(v) for v in value) + "`"
    return f"`{value}`"


def _literal(expression: ast.expr | None) -> object:
    """The default as a value, or None when it is an expression (it takes words)."""
    if expression is None:
        return None
    try:
        return ast.literal_eval(expression)
    except ValueError:
        return None


def rows(
    *,
    defaults: dict[str, object | Callable[[], object]] = DEFAULTS,
    meanings: dict[str, str] = MEANINGS,
    source: str | None = None,
) -> list[Row]:
    """Every setting, in the order settings.py reads them, then ELSEWHERE's.

    Raises KeyError naming a setting that has no meaning or no default."""
    reads = env_reads(SETTINGS_FILE.read_text() if source is None else source)
    table = []
    for name, expression in reads.items():
        relay = name in defaults
        value = defaults[name] if relay else _literal(expression)
        default = value_words(value) or DEFAULT_WORDS.get(name)
        if default is None:
            raise KeyError(f"{name}: its default needs words in DEFAULT_WORDS")
        if name not in meanings:
            raise KeyError(
                f"{name}: no meaning in relayproject/lib/settings_meanings.py"
            )
        table.append(
            Row(name, "relay" if relay else "process", default, meanings[name])
        )
    for name, (default, meaning) in ELSEWHERE.items():
        table.append(Row(name, "process", default, meaning))
    return table


def settings_markdown() -> str:
    """The settings table, as the docs show it."""
    lines = ["| name | kind | default | meaning |", "|---|---|---|---|"]
    for row in rows():
        meaning = row.meaning.replace("|", "\\|")
        lines.append(f"| `{row.name}` | {row.kind} | {row.default} | {meaning} |")
    return "\n".join(lines) + "\n"
