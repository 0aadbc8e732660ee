"""A column a migration adds is nullable or has a database default, so the
processes of the release before, still running while an upgrade migrates
(docs/pages/install/upgrading.md, step 3), can go on inserting rows: they
do not know the column, and a NOT NULL column without a default refuses
their INSERT (the benchmark of the commit before this rule met exactly that
on endpoints.auth_settings).

The columns added before the rule are listed; none may join them."""

from __future__ import annotations

from django.db import migrations
from django.db.migrations.loader import MigrationLoader
from django.db.models.fields import NOT_PROVIDED

APPS = ("deliveries", "endpoints", "notifications")
BEFORE_THE_RULE = {
    ("deliveries", "0003_event_traceparent", "event", "traceparent"),
    ("deliveries", "0013_heartbeat_deaths", "dispatcherheartbeat", "deaths"),
    ("deliveries", "0013_heartbeat_deaths", "dispatcherheartbeat", "released"),
    ("deliveries", "0015_ordered_lanes", "delivery", "lane_seq"),
    ("deliveries", "0015_ordered_lanes", "delivery", "ordering_key"),
    ("deliveries", "0015_ordered_lanes", "delivery", "out_of_order"),
    ("deliveries", "0015_ordered_lanes", "event", "ordering_key"),
    ("endpoints", "0001_initial", "membership", "merchant"),
    ("endpoints", "0004_portal_catalogue_filters_headers", "endpoint", "headers"),
    (
        "endpoints",
        "0006_endpoint_disabled_by_exempt",
        "endpoint",
        "auto_disable_exempt",
    ),
    ("endpoints", "0006_endpoint_disabled_by_exempt", "endpoint", "disabled_by"),
    ("endpoints", "0007_apikey_create_permission_owner_links", "apikey", "owner_links"),
    ("endpoints", "0011_endpoint_permanent_statuses", "endpoint", "permanent_statuses"),
    ("endpoints", "0014_endpoint_verification", "endpoint", "awaiting_verification"),
    ("endpoints", "0014_endpoint_verification", "endpoint", "verification_delivery_id"),
    ("endpoints", "0014_endpoint_verification", "endpoint", "verified_by"),
    ("endpoints", "0015_endpoint_ordered", "endpoint", "ordered"),
    ("endpoints", "0020_broker_destinations", "endpoint", "target"),
}


def added_without_default() -> set[tuple[str, str, str, str]]:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    found = set()
    for (app, name), migration in loader.disk_migrations.items():
        if app not in APPS:
            continue
        for operation in migration.operations:
            if not isinstance(operation, migrations.AddField):
                continue
            field = operation.field
            if field.null or field.many_to_many or field.db_default is not NOT_PROVIDED:
                continue
            found.add((app, name, operation.model_name, operation.name))
    return found


def test_every_column_added_since_has_a_database_default_or_may_be_null():
    assert added_without_default() - BEFORE_THE_RULE == set()


def test_the_list_of_older_columns_is_still_true():
    # A column listed here that no longer matches (a migration squashed or
    # fixed) leaves the list, so it cannot hide a new one of the same name.
    assert BEFORE_THE_RULE <= added_without_default()
