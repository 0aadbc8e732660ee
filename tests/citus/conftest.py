"""The Citus tier: one database of its own on every node for the whole run
(tests/citus/cluster.py), migrated and distributed as the docs say (operations/scaling.md), and
dropped at the end. Collected only by `make test-citus` (tests/conftest.py)."""

from __future__ import annotations

import os

import pytest
from django.core.management import call_command
from django.db import connection, connections

from tests.citus import cluster
from tests.support.processes import Dispatchers

pytestmark = [pytest.mark.citus]

URL = os.environ.get("CITUS_TEST_URL", "")


@pytest.fixture(scope="session")
def django_db_setup(django_db_blocker):
    # Replaces pytest-django's: its test database would exist on the
    # coordinator alone, with no worker registered in it.
    name = cluster.new_name()
    nodes = cluster.workers(URL)
    cluster.create(URL, name)
    settings_dict = connections["default"].settings_dict
    settings_dict["NAME"] = name
    try:
        with django_db_blocker.unblock():
            connections.close_all()
            call_command("migrate", verbosity=0)
            # Four shards: every multi-shard read (the claim's first) touches
            # each, and this tier shares a loaded 2-core machine.
            call_command("citus_distribute", "--shard-count=4", verbosity=0)
        yield
    finally:
        with django_db_blocker.unblock():
            connections.close_all()
        cluster.drop(URL, name, nodes)


class SlowClusterDispatchers(Dispatchers):
    """Dispatchers whose sends may wait a minute for the receiver.

    Several acceptance tests hold replies at their receiver until the test
    has looked (released.wait(60)); on one PostgreSQL that is a second or
    two, inside HTTP_TIMEOUT_SECONDS (10). Every statement here goes through
    a coordinator to workers on the same loaded 2-core machine, and the
    look can take longer: a send that timed out meanwhile would be retried
    and counted twice, which is the receiver's patience, not what the tests
    check (caps, leases, fairness)."""

    def start(self, *args, env=None, **kwargs):
        return super().start(
            *args, env={"HTTP_TIMEOUT_SECONDS": "60", **(env or {})}, **kwargs
        )


@pytest.fixture
def dispatchers(transactional_db, tmp_path):
    started = SlowClusterDispatchers(tmp_path)
    yield started
    started.close()


@pytest.fixture
def distributed(transactional_db):
    """The test database, checked to be distributed (not merely on Citus)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_dist_partition "
            "WHERE logicalrelid = 'deliveries_delivery'::regclass"
        )
        assert cursor.fetchone()[0] == 1
    return connection
