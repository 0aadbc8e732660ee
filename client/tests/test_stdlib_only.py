"""The package imports nothing but the standard library and itself: nothing
of the server (relayproject, deliveries, endpoints, Django) and no third-party
package, so `pip install webhook-relay-client` needs nothing else."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "webhook_relay_client"


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def outside_imports(paths) -> dict[str, set[str]]:
    allowed = set(sys.stdlib_module_names) | {PACKAGE, "__future__"}
    found = {}
    for path in paths:
        outside = imported_roots(path) - allowed
        if outside:
            found[path.name] = outside
    return found


def test_every_module_imports_only_the_standard_library_and_itself():
    modules = sorted((SRC / PACKAGE).glob("*.py"))
    assert len(modules) > 5
    assert outside_imports(modules) == {}


def test_the_scan_names_a_server_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import json\nfrom deliveries.signing import sign\n")
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    import requests\n")
    assert outside_imports([bad, lazy]) == {
        "bad.py": {"deliveries"},
        "lazy.py": {"requests"},
    }


def test_it_imports_and_verifies_on_a_bare_interpreter():
    # -I -S: no site-packages at all, so Django, requests and the server's
    # packages cannot be found, whatever this test process has installed.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import webhook_relay_client as w;"
        "assert w.verify and w.Client('http://x', 'k');"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'requests', 'relayproject', 'deliveries', 'endpoints'}))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(SRC)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
