"""The relay's settings in a project that is not its own: each has a default,
the same as the standalone relay's, and a project's own value is kept."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from django.conf import global_settings

from relayproject.lib.appsettings import DEFAULTS, defaults_apply
from tests.support.processes import ROOT

# `settings.NAME` and `getattr(settings, "NAME"` in the apps' code.
READ = re.compile(r"settings\.([A-Z][A-Z0-9_]*)|getattr\(settings, \"([A-Z0-9_]+)\"")


def _unset_all(settings) -> None:
    for name in DEFAULTS:
        delattr(settings, name)


def test_a_project_that_sets_none_of_them_gets_every_default(settings):
    _unset_all(settings)
    assert defaults_apply() == list(DEFAULTS)
    assert settings.BATCH_SIZE == 200
    assert settings.PORTAL_PRODUCT_NAME == "webhook-relay"
    assert settings.WORKER_ID.endswith(f"-{os.getpid()}")
    assert defaults_apply() == []


def test_a_setting_the_project_sets_is_kept(settings):
    _unset_all(settings)
    settings.MAX_ATTEMPTS = 3
    assert "MAX_ATTEMPTS" not in defaults_apply()
    assert settings.MAX_ATTEMPTS == 3


def test_a_list_default_is_the_projects_own_copy(settings):
    _unset_all(settings)
    defaults_apply()
    settings.TRUSTED_PROXIES.append("10.0.0.1")
    assert DEFAULTS["TRUSTED_PROXIES"] == []


def test_without_debug_no_encryption_key_is_made_up(settings):
    _unset_all(settings)
    settings.DEBUG = False
    defaults_apply()
    assert settings.RELAY_ENCRYPTION_KEYS == []


def test_every_relay_setting_the_code_reads_has_a_default():
    read = set()
    for folder in ("relayproject", "deliveries", "endpoints"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name != "settings.py" and "migrations" not in path.parts:
                read |= {a or b for a, b in READ.findall(path.read_text())}
    assert "BATCH_SIZE" in read, "the scan found the settings read"
    # Django's own, ROOT_URLCONF among them (every project sets it; Django
    # has no default for it).
    djangos = {name for name in dir(global_settings) if name.isupper()}
    djangos.add("ROOT_URLCONF")
    missing = sorted(read - djangos - set(DEFAULTS))
    assert missing == [], (
        "settings the apps read with no default for a project of its own: add "
        "each to relayproject/lib/appsettings.py DEFAULTS"
    )


def test_the_defaults_are_the_standalone_relays():
    # relayproject/settings.py read with nothing set but what production needs.
    names = [name for name, value in DEFAULTS.items() if not callable(value)]
    read = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, relayproject.settings as s; "
            "print(json.dumps({n: getattr(s, n) for n in sys.argv[1:]}))",
            *names,
        ],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "SECRET_KEY": "s" * 50},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(read.stdout) == {name: DEFAULTS[name] for name in names}
