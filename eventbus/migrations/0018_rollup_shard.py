"""The rollup's rows get a shard (the writing connection's backend pid) in their primary key, so
two workers settling the same consumer and organization no longer queue on one row's lock until
the other's commit (the settle statements' upsert held it to the end of their transaction).
Readers already sum over the rows of a key range; existing rows become shard 0. The table is
small (purged after EVENTBUS ROLLUP_KEEP_DAYS), so rebuilding its primary key is quick.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("eventbus", "0017_rollup")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE eventbus_rollup ADD COLUMN shard integer NOT NULL DEFAULT 0;\n"
                    "ALTER TABLE eventbus_rollup DROP CONSTRAINT eventbus_rollup_pkey;\n"
                    "ALTER TABLE eventbus_rollup ADD CONSTRAINT eventbus_rollup_pkey "
                    "PRIMARY KEY (bucket_start, consumer, organization_id, shard);",
                    reverse_sql=(
                        # the shards of a key folded into one row (no count lost)
                        "WITH rows AS (DELETE FROM eventbus_rollup RETURNING *) "
                        "INSERT INTO eventbus_rollup (bucket_start, consumer, organization_id, "
                        "shard, done, failed, dead, lag_seconds) "
                        "SELECT bucket_start, consumer, organization_id, 0, sum(done), "
                        "sum(failed), sum(dead), max(lag_seconds) FROM rows GROUP BY 1, 2, 3;\n"
                        "ALTER TABLE eventbus_rollup DROP CONSTRAINT eventbus_rollup_pkey;\n"
                        "ALTER TABLE eventbus_rollup ADD CONSTRAINT eventbus_rollup_pkey "
                        "PRIMARY KEY (bucket_start, consumer, organization_id);\n"
                        "ALTER TABLE eventbus_rollup DROP COLUMN shard;"
                    ),
                )
            ],
            state_operations=[
                migrations.AddField(
                    model_name="rollup",
                    name="shard",
                    field=models.IntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="rollup",
                    name="pk",
                    field=models.CompositePrimaryKey(
                        "bucket_start",
                        "consumer",
                        "organization_id",
                        "shard",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
            ],
        )
    ]
