"""Shared fixtures. PostgreSQL tests need TEST_DATABASE_URL; in CI they must run."""

from __future__ import annotations

import os

import pytest
from django.db import connection

from tests.support import flush, podman

# The API's keys and merchants, for the tests of every face that calls it.
from tests.support.api import (  # noqa: F401
    any_key,
    merchant,
    other_merchant,
    platform,
    scoped,
)

ON_POSTGRES = os.environ.get("TEST_DATABASE_URL", "").startswith(("postgres", "pgsql"))

# Transactional tests end with a DELETE of every table, not a TRUNCATE.
flush.install()


# Browser tests need Debian's Chromium. In CI a missing browser fails the run
# (.ci/run installs it); on a developer's machine they skip, said once.
CHROMIUM = os.environ.get("RELAY_TEST_CHROMIUM", "/usr/bin/chromium")
HAS_CHROMIUM = os.access(CHROMIUM, os.X_OK)
NO_BROWSER = (
    f"browser tests skipped: {CHROMIUM} is missing "
    "(apt-get install chromium chromium-driver)"
)

# Container tests (tests/packaging) build and run the image with podman. In CI
# a missing podman fails the run (.ci/run installs it); elsewhere they skip.
NO_CONTAINERS = podman.missing()


# The Citus tier (tests/citus) needs a Citus coordinator: CITUS_TEST_URL, and
# this process's database on it (`make test-citus` sets both). Anywhere else,
# CI included (it has no Citus package), it is not collected: one line says so.
CITUS_URL = os.environ.get("CITUS_TEST_URL", "")
if not CITUS_URL:
    CITUS_OFF = "citus tier skipped: CITUS_TEST_URL is unset (make test-citus)"
elif os.environ.get("TEST_DATABASE_URL") != CITUS_URL:
    CITUS_OFF = "citus tier skipped: it runs on its own, with make test-citus"
else:
    CITUS_OFF = ""
collect_ignore = ["citus"] if CITUS_OFF else []


def pytest_report_header(config):
    return [CITUS_OFF] if CITUS_OFF else []


def pytest_collection_modifyitems(config, items):
    browser_items = [item for item in items if "browser" in item.keywords]
    if browser_items and not HAS_CHROMIUM:
        if os.environ.get("CI"):
            raise pytest.UsageError(
                f"CI needs {CHROMIUM} for the browser tests "
                "(apt-get install chromium chromium-driver)"
            )
        config._relay_browser_skipped = len(browser_items)
        skip = pytest.mark.skip(reason=NO_BROWSER)
        for item in browser_items:
            item.add_marker(skip)
    container_items = [item for item in items if "container" in item.keywords]
    if container_items and NO_CONTAINERS:
        if os.environ.get("CI"):
            raise pytest.UsageError(f"CI needs the container tests: {NO_CONTAINERS}")
        config._relay_containers_skipped = len(container_items)
        skip = pytest.mark.skip(reason=f"container tests skipped: {NO_CONTAINERS}")
        for item in container_items:
            item.add_marker(skip)
    if ON_POSTGRES:
        return
    if os.environ.get("CI") and not os.environ.get("RELAY_SQLITE_PASS"):
        raise pytest.UsageError(
            "CI must set TEST_DATABASE_URL: PostgreSQL tests never skip there"
        )
    skip = pytest.mark.skip(reason="needs TEST_DATABASE_URL (PostgreSQL)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = getattr(config, "_relay_browser_skipped", 0)
    if skipped:
        terminalreporter.write_line(f"{NO_BROWSER}: {skipped} tests")
    skipped = getattr(config, "_relay_containers_skipped", 0)
    if skipped:
        terminalreporter.write_line(
            f"container tests skipped: {NO_CONTAINERS}: {skipped} tests"
        )


@pytest.fixture(autouse=True)
def _allow_loopback(settings):
    # Test receivers live on 127.0.0.1; the policy itself is tested on its own.
    settings.RELAY_ALLOW_PRIVATE_DESTINATIONS = True


@pytest.fixture(autouse=True)
def _fresh_key_cache():
    # Each test's keys and audiences are read from its own database, not a
    # previous test's (so its query counts do not depend on the order).
    from endpoints.apikeys import live_keys
    from endpoints.audiences import cache

    live_keys.clear()
    cache.clear()
    yield
    live_keys.clear()
    cache.clear()


@pytest.fixture
def receiver():
    from tests.support.fakes import Receiver

    with Receiver() as r:
        yield r


@pytest.fixture
def spans():
    """Spans finished during the test, from an in-memory OpenTelemetry SDK."""
    from tests.support.spans import Spans, memory_exporter

    return Spans(memory_exporter())


@pytest.fixture
def on_postgres():
    assert connection.vendor == "postgresql"


@pytest.fixture(scope="session", autouse=True)
def _end_stray_sessions(django_db_setup, django_db_blocker):
    """Each run has its own test database: end any session a live-server or
    helper thread left open on it, so pytest-django can drop it at the end."""
    yield
    if not ON_POSTGRES:
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(autouse=True)
def _fresh_catalogue_cache():
    # Each test's rows are rolled back; the per-process schema cache must not
    # outlive them.
    from endpoints.catalogue import cache_clear

    cache_clear()
    yield
    cache_clear()
