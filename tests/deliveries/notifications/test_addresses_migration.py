"""Migration notifications 0003 on a database with saved extra addresses: they
become pending rows with no confirmation sent (mailed nothing until an owner
sends one and it is confirmed), and going back lists them again."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from deliveries.notifications.addresses import confirmed_addresses
from deliveries.notifications.models import NotificationAddress
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BEFORE = [("notifications", "0002_merchant_columns")]
AFTER = [("notifications", "0003_extra_addresses_and_mail_quota")]


def migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor


def test_saved_addresses_become_pending_and_come_back_on_the_way_down():
    merchant = factories.merchant("acme")
    try:
        apps = migrate(BEFORE).loader.project_state(BEFORE).apps
        apps.get_model("notifications", "NotificationSettings").objects.create(
            merchant_id=merchant.pk,
            extra_emails=[" OnCall@Example.org", "oncall@example.org", "b@example.org"],
        )

        migrate(AFTER)
        rows = NotificationAddress.objects.order_by("email")
        assert [(r.email, r.listed, r.asked_at, r.confirmed_at) for r in rows] == [
            ("b@example.org", True, None, None),
            ("oncall@example.org", True, None, None),
        ]
        assert confirmed_addresses(merchant_id=merchant.pk) == []

        apps = migrate(BEFORE).loader.project_state(BEFORE).apps
        saved = apps.get_model("notifications", "NotificationSettings").objects.get()
        assert sorted(saved.extra_emails) == ["b@example.org", "oncall@example.org"]
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
