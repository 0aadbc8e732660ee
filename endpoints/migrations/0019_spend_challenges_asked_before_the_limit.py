"""Challenges asked before 0017 may have been read back, cut short, from an
attempt that kept an echo of them; pasting is closed for them (echoing one
still verifies). The merchant asks for a new challenge, which starts afresh."""

from django.db import migrations

# endpoints.verification.WRONG_ANSWERS_LIMIT when this was written; a migration
# keeps its own copy, as later code may change.
SPENT = 5


def spend(apps, schema_editor):
    Endpoint = apps.get_model("endpoints", "Endpoint")
    Endpoint.objects.filter(awaiting_verification=True).update(
        verification_wrong_answers=SPENT
    )


class Migration(migrations.Migration):
    dependencies = [
        ("endpoints", "0018_merchant_is_active_help"),
    ]

    operations = [migrations.RunPython(spend, migrations.RunPython.noop)]
