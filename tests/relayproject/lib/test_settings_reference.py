"""The docs' settings table: every setting the code reads is in it, with the
code's own default and a meaning; a meaning for a setting nobody reads fails."""

from __future__ import annotations

import pytest

from relayproject.lib import settings_reference
from relayproject.lib.appsettings import DEFAULTS
from relayproject.lib.settings_meanings import ELSEWHERE, MEANINGS
from relayproject.lib.settings_reference import (
    SETTINGS_FILE,
    env_reads,
    rows,
    settings_markdown,
    value_words,
)
from tests.support.processes import ROOT


def test_every_setting_read_has_a_meaning_and_every_meaning_a_setting():
    read = set(env_reads(SETTINGS_FILE.read_text()))
    assert {"DATABASE_URL", "BATCH_SIZE", "EMAIL_URL"} <= read, "the scan found them"
    assert sorted(read - set(MEANINGS)) == [], (
        "settings with no meaning: add each to relayproject/lib/settings_meanings.py"
    )
    assert sorted(set(MEANINGS) - read) == [], "meanings of settings nobody reads"


def test_every_relay_setting_is_in_the_table_as_a_relay_setting():
    table = {row.name: row for row in rows()}
    assert sorted(set(DEFAULTS) - set(table)) == []
    assert {name for name, row in table.items() if row.kind == "relay"} == set(DEFAULTS)


def test_a_relay_settings_default_comes_from_appsettings():
    changed = {**DEFAULTS, "BATCH_SIZE": 500}
    table = {row.name: row for row in rows(defaults=changed)}
    assert table["BATCH_SIZE"].default == "`500`"


def test_a_process_settings_default_comes_from_its_read_in_settings_py():
    source = 'LOG_LEVEL = env("LOG_LEVEL", default="WARNING")\n'
    row = rows(source=source)[0]
    assert (row.name, row.kind, row.default) == ("LOG_LEVEL", "process", "`WARNING`")


def test_a_new_setting_without_a_meaning_fails_naming_it():
    source = 'NEW_KNOB = env.int("RELAY_NEW_KNOB", default=3)\n'
    with pytest.raises(KeyError, match="RELAY_NEW_KNOB"):
        rows(source=source)


def test_a_computed_default_without_words_fails_naming_it():
    source = 'X = env("RELAY_COMPUTED", default=compute())\n'
    meanings = {**MEANINGS, "RELAY_COMPUTED": "made up"}
    with pytest.raises(KeyError, match="RELAY_COMPUTED: its default needs words"):
        rows(source=source, meanings=meanings)


def test_reads_keep_the_order_of_settings_py_nested_ones_included():
    source = (
        'A = env("FIRST", default="x")\n'
        'B = env("SECOND", default=env("INNER", default="y"))\n'
    )
    assert list(env_reads(source)) == ["FIRST", "SECOND", "INNER"]


def test_every_variable_read_elsewhere_is_named_in_the_code():
    code = (
        "\n".join(path.read_text() for path in (ROOT / "relayproject").rglob("*.py"))
        + (ROOT / "Makefile").read_text()
    )
    assert [name for name in ELSEWHERE if name not in code] == []


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (True, "`true`"),
        (False, "`false`"),
        (10.0, "`10`"),
        (0.5, "`0.5`"),
        (10_000, "`10000`"),
        ("", "empty"),
        ([], "empty"),
        (["10.0.0.1", "10.0.0.2"], "`10.0.0.1,10.0.0.2`"),
        ("#2755c9", "`#2755c9`"),
        (None, None),
        (len, None),
    ],
)
def test_value_words(value, words):
    assert value_words(value) == words


def test_the_table_has_one_row_per_setting_and_escapes_pipes(monkeypatch):
    monkeypatch.setitem(MEANINGS, "LOG_LEVEL", "a | b")
    table = settings_markdown()
    assert "| `LOG_LEVEL` | process | `INFO` | a \\| b |" in table
    names = [line.split("`")[1] for line in table.splitlines()[2:]]
    assert len(names) == len(set(names)) == len(settings_reference.rows())
