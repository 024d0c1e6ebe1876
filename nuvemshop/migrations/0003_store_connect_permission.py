"""The admin's "Connect a store" page has its own permission (nuvemshop.views.connect)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("nuvemshop", "0002_skipped_records"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="store",
            options={"permissions": [("connect_store", "Can connect a Nuvemshop store")]},
        ),
    ]
