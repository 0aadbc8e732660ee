"""Idempotency scopes of merchant-scoped keys move from the slug to "merchant:<pk>".

A scoped key publishes only to its own merchant, so any scope other than ""
and "platform" belongs to the event's merchant, whatever its slug was then.
Rows under "platform" stay there: for a merchant whose slug was "platform"
they cannot be told apart from the platform keys' own, and keeping them with
the platform only refuses that merchant's reuse of an old key, never leaks.
"""

from django.db import migrations
from django.db.models import Exists, OuterRef


def forward(apps, schema_editor):
    Event = apps.get_model("deliveries", "Event")
    pairs = (
        Event.objects.exclude(idempotency_scope__in=["", "platform"])
        .exclude(idempotency_scope__startswith="merchant:")
        .values_list("idempotency_scope", "merchant_id")
        .distinct()
    )
    for old_scope, merchant_id in list(pairs):
        new_scope = f"merchant:{merchant_id}"
        taken = Event.objects.filter(
            idempotency_scope=new_scope, idempotency_key=OuterRef("idempotency_key")
        )
        # A key used under two old slugs of one merchant (a rename) keeps
        # the first one moved; the other stays under its old scope.
        Event.objects.filter(
            idempotency_scope=old_scope, merchant_id=merchant_id
        ).exclude(Exists(taken)).update(idempotency_scope=new_scope)


class Migration(migrations.Migration):
    dependencies = [("deliveries", "0003_event_traceparent")]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
