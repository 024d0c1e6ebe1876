"""The worker registry's quiet / stop requests and each pump's threads (core.workers)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("core", "0015_staff_organization")]

    operations = [
        migrations.AddField(
            model_name="workerprocess",
            name="threads",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="workerprocess",
            name="mode",
            field=models.CharField(default="running", max_length=20),
        ),
        migrations.AddField(
            model_name="workerprocess",
            name="command",
            field=models.CharField(blank=True, default="", max_length=10),
        ),
        migrations.AddField(
            model_name="workerprocess",
            name="command_by",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="workerprocess",
            name="command_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
