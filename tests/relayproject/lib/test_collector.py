"""The cycle collector is settled by a process's owner, and only by it
(relayproject/lib/collector.py): a dispatcher started as a command, a gunicorn
worker through gunicorn.conf.py; never a process that merely calls the
dispatcher in-process."""

from __future__ import annotations

import gc
from io import StringIO

import pytest
from django.core.management import call_command

from relayproject.lib.collector import FIRST_THRESHOLD, collector_settle
from tests.relayproject.test_settings_transport import production_env, run_python
from tests.support.processes import child_env

# Printed by a child at its end: "collector <objects frozen> <first threshold>".
SHOW = "import gc; print('collector', gc.get_freeze_count(), gc.get_threshold()[0])"


def collector_of(code: str, env: dict[str, str]) -> tuple[int, int]:
    done = run_python("-c", f"{code}\n{SHOW}", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    # The first such line: a child may print one earlier than SHOW's.
    line = next(x for x in done.stdout.splitlines() if x.startswith("collector "))
    frozen, first = line.split()[1:]
    return int(frozen), int(first)


@pytest.fixture
def collector_restored():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_settling_freezes_what_is_loaded_and_collects_the_young_less_often(
    collector_restored,
):
    _, middle, oldest = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    collector_settle()
    # This process has Django, the apps and pytest loaded: far more than this.
    assert gc.get_freeze_count() > 10_000
    assert gc.get_threshold() == (FIRST_THRESHOLD, middle, oldest)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_dispatcher_started_as_a_command_settles_before_its_threads_start(
    on_postgres,
):
    # The collector's state when the process starts its first thread (the
    # heartbeat, then the engine's): settled then, not only by the end.
    run = (
        "import gc, runpy, sys, threading\n"
        "seen = []\n"
        "start = threading.Thread.start\n"
        "def first_start(thread):\n"
        "    seen.append((gc.get_freeze_count(), gc.get_threshold()[0]))\n"
        "    start(thread)\n"
        "threading.Thread.start = first_start\n"
        "sys.argv = ['manage.py', 'run_dispatcher', '--drain']\n"
        "runpy.run_path('manage.py', run_name='__main__')\n"
        "print('collector', *seen[0])"
    )
    frozen, first = collector_of(run, child_env())
    assert frozen > 10_000
    assert first == FIRST_THRESHOLD


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_dispatcher_called_in_process_leaves_the_callers_collector_alone(
    on_postgres, collector_restored
):
    before = gc.get_freeze_count(), gc.get_threshold()
    call_command("run_dispatcher", "--drain", stdout=StringIO())
    assert (gc.get_freeze_count(), gc.get_threshold()) == before


def test_a_gunicorn_worker_loads_its_url_map_then_settles(tmp_path):
    # What a gunicorn worker does: import the application, then the hook.
    worker = (
        "import runpy, sys\n"
        "import relayproject.wsgi\n"
        "assert 'relayproject.urls' not in sys.modules\n"
        "runpy.run_path('gunicorn.conf.py')['post_worker_init'](None)\n"
        "assert 'relayproject.urls' in sys.modules"
    )
    frozen, first = collector_of(worker, production_env(tmp_path))
    assert frozen > 10_000
    assert first == FIRST_THRESHOLD
