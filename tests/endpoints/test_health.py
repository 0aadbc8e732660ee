"""endpoints/health.py, probes.py and health_stats.py are the only modules that
write EndpointHealth.

Read from the source (no database): an ORM write whose receiver chain names
EndpointHealth, a new EndpointHealth(...) instance, a .save() on a health row,
or SQL text that updates, inserts into or deletes from the table.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Outcomes and the rate bucket; the probe and the hands on the breaker; the
# rolling statistics.
OWNERS = (
    Path("endpoints/health.py"),
    Path("endpoints/probes.py"),
    Path("endpoints/health_stats.py"),
)
PACKAGES = ("deliveries", "endpoints", "relayproject", "bench")
WRITE_METHODS = {
    "update",
    "create",
    "get_or_create",
    "update_or_create",
    "bulk_create",
    "bulk_update",
    "delete",
    "save",
}
SQL_WRITE = re.compile(
    r"\b(UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+"
    r"(\{EndpointHealth\._meta\.db_table\}|\"?endpoints_endpointhealth\b)",
    re.IGNORECASE,
)


def _names_health(node: ast.AST) -> bool:
    """Whether a receiver chain (a.b().c...) starts at EndpointHealth or a health row."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            if node.attr == "health":  # endpoint.health.save()
                return True
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            break
    return isinstance(node, ast.Name) and (
        node.id == "EndpointHealth" or node.id.lower() in {"health", "healths"}
    )


def health_writes(source: str) -> list[str]:
    """The lines of `source` that write EndpointHealth, as "line: text"."""
    tree = ast.parse(source)
    found: set[int] = set()
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "EndpointHealth":
                hit = True
            elif isinstance(func, ast.Attribute) and func.attr in WRITE_METHODS:
                hit = _names_health(func.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = bool(SQL_WRITE.search(node.value))
        elif isinstance(node, ast.JoinedStr):
            # The f-string's text with {EndpointHealth._meta.db_table} kept.
            # (Not ast.get_source_segment: it splits the whole file per call.)
            text = "".join(
                f"{{{ast.unparse(part.value)}}}"
                if isinstance(part, ast.FormattedValue)
                else str(getattr(part, "value", ""))
                for part in node.values
            )
            hit = bool(SQL_WRITE.search(text))
        if hit:
            found.add(node.lineno)
    lines = source.splitlines()
    return [f"{n}: {lines[n - 1].strip()}" for n in sorted(found)]


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts or relative in OWNERS:
                continue
            if relative.parts[:2] == ("bench", "out"):
                # The benchmarks' output, exports of other commits included
                # (bench/deliveries_bench.py --rev): not this tree's code.
                continue
            yield relative, path.read_text()


def test_only_the_health_modules_write_endpoint_health():
    writers = {
        str(relative): lines
        for relative, source in _modules()
        if (lines := health_writes(source))
    }
    assert writers == {}, "EndpointHealth is written only in " + ", ".join(
        map(str, OWNERS)
    )


def test_the_owners_are_seen_writing():
    # The scan finds what the owners do; were it blind, the test above
    # would pass for any module.
    found = {owner: health_writes((ROOT / owner).read_text()) for owner in OWNERS}
    assert [owner for owner, lines in found.items() if not lines] == []
    text = "\n".join(line for lines in found.values() for line in lines)
    for write in (
        "EndpointHealth.objects.create(",
        "EndpointHealth.objects.bulk_create(",
        "health.save(",
        ").update(",
        '_PG_STATS_UPDATE = f"""',
    ):
        assert write in text, write


def test_each_kind_of_write_is_found():
    source = """
from endpoints.models import EndpointHealth
EndpointHealth.objects.filter(pk=1).update(breaker_state="open")
EndpointHealth.objects.select_for_update().get(pk=1).save()
EndpointHealth(endpoint_id="e", failure_threshold=5, cooldown_seconds=30)
endpoint.health.save(update_fields=["breaker_state"])
health.save()
SQL = "UPDATE endpoints_endpointhealth SET rate_tokens = 0"
SQL2 = f"INSERT INTO {EndpointHealth._meta.db_table} VALUES (1)"
EndpointHealth.objects.filter(pk=1).values_list("pk")
SELECT = "SELECT * FROM endpoints_endpointhealth"
"""
    lines = [line.split(":")[0] for line in health_writes(source)]
    assert lines == ["3", "4", "5", "6", "7", "8", "9"]
