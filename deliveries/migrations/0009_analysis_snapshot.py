from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0008_console_indexes"),
    ]

    operations = [
        migrations.CreateModel(
            name="AnalysisSnapshot",
            fields=[
                (
                    "name",
                    models.CharField(max_length=80, primary_key=True, serialize=False),
                ),
                ("computed_at", models.DateTimeField()),
                ("data", models.JSONField()),
            ],
        ),
    ]
