"""Extra notification addresses become rows that wait for their owners to
confirm them (deliveries/notifications/addresses.py), and each merchant gets
a count of the day's emails (RELAY_NOTIFICATION_MAIL_PER_DAY).

Addresses saved before this are listed but pending, with no confirmation sent
yet: they get no email until an owner sends them one from the portal's
Notifications page and they confirm. Reversible: going back lists every
listed address again, confirmed or not.
"""

import django.db.models.deletion
from django.db import migrations, models
from django.utils import timezone


def to_rows(apps, schema_editor):
    settings_model = apps.get_model("notifications", "NotificationSettings")
    address_model = apps.get_model("notifications", "NotificationAddress")
    now = timezone.now()
    rows = {}
    for merchant_id, extra in settings_model.objects.values_list("pk", "extra_emails"):
        for address in extra or []:
            email = address.strip().lower()
            if email:
                rows[(merchant_id, email)] = address_model(
                    merchant_id=merchant_id, email=email, added_at=now
                )
    address_model.objects.bulk_create(rows.values())


def to_lists(apps, schema_editor):
    settings_model = apps.get_model("notifications", "NotificationSettings")
    address_model = apps.get_model("notifications", "NotificationAddress")
    lists = {}
    for merchant_id, email in address_model.objects.filter(listed=True).values_list(
        "merchant_id", "email"
    ):
        lists.setdefault(merchant_id, []).append(email)
    for merchant_id, extra in lists.items():
        settings_model.objects.update_or_create(
            merchant_id=merchant_id, defaults={"extra_emails": extra}
        )


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0002_merchant_columns"),
    ]

    operations = [
        migrations.CreateModel(
            name="MailQuota",
            fields=[
                (
                    "merchant",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="endpoints.merchant",
                    ),
                ),
                ("day", models.DateField(blank=True, null=True)),
                ("sent", models.PositiveIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name="NotificationAddress",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "merchant",
                        "email",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("email", models.EmailField(max_length=254)),
                ("listed", models.BooleanField(default=True)),
                ("added_at", models.DateTimeField()),
                ("confirmed_at", models.DateTimeField(blank=True, null=True)),
                ("asked_at", models.DateTimeField(blank=True, null=True)),
                (
                    "token_hash",
                    models.CharField(blank=True, default="", max_length=64),
                ),
                ("token_expires_at", models.DateTimeField(blank=True, null=True)),
                (
                    "merchant",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="endpoints.merchant",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("token_hash", ""), _negated=True),
                        fields=["token_hash"],
                        name="notification_address_token_idx",
                    )
                ],
            },
        ),
        migrations.RunPython(to_rows, to_lists, elidable=False),
        migrations.RemoveField(
            model_name="notificationsettings",
            name="extra_emails",
        ),
    ]
