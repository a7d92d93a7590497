"""Build the time buckets of the runs recorded before buckets were written with the records.

Once, at the upgrade, rather than on the first page that asks: a run of a million copies takes
about a minute to bucket on a 2-core machine, longer than a web request may take. Runs whose
rows retention deleted get no bucket (their stored results stay what pages read).

The statement is copied here as campaigns.models.buckets wrote it when this migration was made
(its insert_sql and rebuild, PostgreSQL's path), so the migration does the same forever
whatever the live code becomes; the tables are those of the historical models.
"""

from django.db import migrations

_KEY = "run_id, width, k, step, source_endpoint_id, destination_endpoint_id, category"
_SUMS = ("files_ok", "files_failed", "files_cancelled", "moved", "busy", "duration_sum")


def _insert_sql(table: str, source: str) -> str:
    overlap = "greatest(least(e, (k + 1) * w) - greatest(s, k * w), 0)"
    ended = "k = floor(e / w)"
    merge = ", ".join(f"{c} = b.{c} + EXCLUDED.{c}" for c in _SUMS)
    # Names and fragments of ours; every value is a parameter.
    return f"""
INSERT INTO {table} AS b ({_KEY}, {", ".join(_SUMS)}, first_start, last_end)
SELECT run_id, w, k, step, src, dst, category,
       count(*) FILTER (WHERE state = 'succeeded' AND {ended}),
       count(*) FILTER (WHERE state = 'failed' AND {ended}),
       count(*) FILTER (WHERE state = 'cancelled' AND {ended}),
       coalesce(sum(CASE WHEN state <> 'succeeded' THEN 0
                         WHEN e - s > 1e-6 THEN moved * {overlap} / (e - s)
                         WHEN {ended} THEN moved ELSE 0 END), 0),
       sum({overlap}),
       coalesce(sum(duration) FILTER (WHERE {ended} AND state <> 'cancelled'), 0),
       min(greatest(s, k * w)), max(least(e, (k + 1) * w))
FROM (
    SELECT run_id, coalesce(step, -1) AS step, source_endpoint_id AS src, destination_endpoint_id AS dst, state,
           CASE WHEN state = 'succeeded' THEN '' ELSE coalesce(error_category, '') END AS category,
           coalesce(bytes_transferred, 0)::float8 AS moved, duration,
           extract(epoch FROM started_at)::float8 AS s, extract(epoch FROM finished_at)::float8 AS e
    FROM {source} AS x
    WHERE state IN ('succeeded', 'failed', 'cancelled') AND started_at IS NOT NULL AND finished_at IS NOT NULL
) r
CROSS JOIN (VALUES (1), (60)) AS ws(w)
CROSS JOIN LATERAL generate_series(floor(s / w)::bigint, floor(e / w)::bigint) AS k
GROUP BY run_id, w, k, step, src, dst, category
ON CONFLICT ({_KEY}) DO UPDATE SET {merge},
    first_start = least(b.first_start, EXCLUDED.first_start), last_end = greatest(b.last_end, EXCLUDED.last_end)
"""  # noqa: S608


def build(apps, schema_editor):
    Run = apps.get_model("campaigns", "Run")
    Transfer = apps.get_model("campaigns", "Transfer")
    TransferBucket = apps.get_model("campaigns", "TransferBucket")
    source = f"(SELECT * FROM {Transfer._meta.db_table} WHERE run_id = %s)"  # noqa: S608
    statement = _insert_sql(TransferBucket._meta.db_table, source)
    # Every run that has rows now was recorded before this migration: each run after it gets
    # its buckets as its copies are recorded.
    for run_id in Transfer.objects.order_by("run_id").values_list("run_id", flat=True).distinct():
        # The run's row locked first, as every recording transaction locks it first.
        list(Run.objects.select_for_update().filter(pk=run_id).values_list("pk"))
        TransferBucket.objects.filter(run_id=run_id).delete()
        with schema_editor.connection.cursor() as cursor:
            # generate_series with row-dependent bounds is estimated at 1,000 rows a copy:
            # the planner would JIT-compile a query it expects to return billions of rows.
            cursor.execute("SET LOCAL jit = off")
            cursor.execute(statement, [run_id])


class Migration(migrations.Migration):
    dependencies = [("campaigns", "0012_transfer_buckets")]

    operations = [migrations.RunPython(build, migrations.RunPython.noop, elidable=True)]
