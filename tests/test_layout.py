"""The tests/ tree mirrors the source tree, so a test is found where its module is.

The tests of `deliveries/publish/ingest.py` are `tests/deliveries/publish/
test_ingest.py` (or `test_ingest_<aspect>.py`). Outside the mirror only the
folders of their own are allowed: acceptance/ (real processes across
modules), walk/ (every page in a browser), support/ (the shared helpers and
fixtures), citus/ (issue 24's tier), client/ (the library in client/
against a live server), packaging/ (the built package and image) and
bench/ (bench/'s report writer, fed recorded results: no benchmark runs in
a test); at the top, only the checks of the whole tree (PROJECT_WIDE). A
test file for every module is not required here; a folder for every named
package is.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
APPS = ("relayproject", "endpoints", "deliveries")
TIERS = ("acceptance", "walk", "support", "citus", "client", "packaging", "bench")
# Checks of the whole tree, no one module's tests: the only ones at the top.
PROJECT_WIDE = ("test_layout.py", "test_patterns.py", "test_template_comments.py")
# Django's plumbing, not packages a reader looks for tests of.
PLUMBING = {"migrations", "management", "templatetags", "formats", "__pycache__"}


def is_source_package(relative: Path) -> bool:
    folder = ROOT / relative
    return relative.parts[0] in APPS and (folder / "__init__.py").is_file()


def misplaced(test_files: list[Path]) -> list[str]:
    """Test modules (paths relative to tests/) that sit outside the mirror."""
    wrong = []
    for path in test_files:
        folder = path.parent
        if folder == Path("."):
            allowed = path.name in PROJECT_WIDE
        elif folder.parts[0] in TIERS:
            allowed = True
        else:
            allowed = is_source_package(folder)
        if not allowed:
            wrong.append(path.as_posix())
    return wrong


def named_packages() -> list[Path]:
    """Each app and each of its sub-packages (but Django's plumbing)."""
    found = []
    for app in APPS:
        found.append(Path(app))
        for init in sorted((ROOT / app).glob("*/__init__.py")):
            if init.parent.name not in PLUMBING:
                found.append(init.parent.relative_to(ROOT))
    return found


def test_every_test_module_sits_in_the_mirror_or_a_tier_folder():
    test_files = sorted(p.relative_to(TESTS) for p in TESTS.rglob("test_*.py"))
    assert len(test_files) > 100, "the walk found the test modules"
    wrong = misplaced(test_files)
    assert wrong == [], (
        "test modules outside the mirror: put each beside the source module it "
        "tests, tests/<package path>/test_<module>[_<aspect>].py "
        "(or in acceptance/ or walk/ for those tiers)"
    )


def test_every_named_package_has_its_test_folder():
    packages = named_packages()
    assert Path("deliveries/publish") in packages
    missing = [p.as_posix() for p in packages if not (TESTS / p).is_dir()]
    assert missing == []


def test_every_test_folder_is_a_package():
    # Two folders may each hold a test_api.py: as packages their modules are
    # tests.deliveries.notifications.test_api and tests.relayproject.test_api.
    folders = {p.parent for p in TESTS.rglob("*.py")}
    missing = sorted(
        f.relative_to(TESTS).as_posix()
        for f in folders
        if "__pycache__" not in f.parts and not (f / "__init__.py").is_file()
    )
    assert missing == []


def test_the_rules_refuse_what_they_should():
    # The rules themselves, on names that are wrong on purpose.
    assert misplaced(
        [
            Path("api/test_scoping.py"),
            Path("postgres/test_claim_locks.py"),
            Path("deliveries/nowhere/test_x.py"),
            Path("test_loose.py"),
        ]
    ) == [
        "api/test_scoping.py",
        "postgres/test_claim_locks.py",
        "deliveries/nowhere/test_x.py",
        "test_loose.py",
    ]
    assert (
        misplaced(
            [
                Path("deliveries/publish/test_ingest.py"),
                Path("acceptance/test_fairness.py"),
                Path("relayproject/test_api.py"),
                Path("test_layout.py"),
            ]
        )
        == []
    )
