"""PostgreSQL: the pod-hour and node-hour tables become partitioned by month on `hour` (apps/usage/partitions.py).
Nothing changes on SQLite, nor in Django's model state."""

from django.db import migrations


def forward(apps, schema_editor):
    from apps.usage.partitions import PARTITIONED, partition

    for table in PARTITIONED:
        partition(schema_editor.connection, table)


def backward(apps, schema_editor):
    from apps.usage.partitions import PARTITIONED, unpartition

    for table in PARTITIONED:
        unpartition(schema_editor.connection, table)


class Migration(migrations.Migration):

    dependencies = [
        ("usage", "0004_workloads"),
    ]

    operations = [migrations.RunPython(forward, backward)]
