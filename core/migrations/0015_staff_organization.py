"""Organization-scoped staff (core.admin_scope): which organizations a staff user works in.

The table has an organization, so it gets the tenant wall like every tenant table: the admin
reads a user's bindings under the platform scope, before narrowing the request to one of them.
"""

import django.db.models.deletion
from django.db import migrations, models

from core.migration_ops import tenant_wall


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("core", "0014_organization_feature_flags"),
    ]

    operations = [
        migrations.CreateModel(
            name="StaffOrganization",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "organization",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="core.organization",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="staff_organizations",
                        to="auth.user",
                    ),
                ),
            ],
            options={
                "verbose_name": "staff organization",
                "db_table": "core_staff_organization",
                "permissions": [
                    (
                        "all_organizations",
                        "Platform operator: sees every organization in the admin",
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("user", "organization"), name="staff_org_unique"
                    )
                ],
            },
        ),
        tenant_wall("core_staff_organization"),
    ]
