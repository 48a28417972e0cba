"""The ledger tables' cluster foreign keys lose their own index (apps.usage.models.ClusterKey): each table's
unique key starts with the cluster and serves those lookups. The pod- and node-hour (cluster, hour) indexes go
for the same reason. In the database only the indexes are dropped (apps.common.schema); the keys' constraints
stay as they are."""

import django.db.models.deletion
from django.db import migrations, models

from apps.common.schema import drop_column_indexes

TABLES = ['usage_bucket', 'usage_capacityday', 'usage_capacityhour', 'usage_nodehour', 'usage_podhour', 'usage_podobservation', 'usage_usageday', 'usage_usagehour', 'usage_workloadday']


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0005_team_name_is_a_label_value'),
        ('usage', '0006_bucket_collected_at_index'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='nodehour',
            name='usage_nodeh_cluster_888233_idx',
        ),
        migrations.RemoveIndex(
            model_name='podhour',
            name='usage_podho_cluster_c9e6a7_idx',
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='bucket',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='buckets', to='inventory.cluster'),
                ),
                migrations.AlterField(
                    model_name='capacityday',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='inventory.cluster'),
                ),
                migrations.AlterField(
                    model_name='capacityhour',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='inventory.cluster'),
                ),
                migrations.AlterField(
                    model_name='nodehour',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='inventory.cluster'),
                ),
                migrations.AlterField(
                    model_name='podhour',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='inventory.cluster'),
                ),
                migrations.AlterField(
                    model_name='podobservation',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='inventory.cluster'),
                ),
                migrations.AlterField(
                    model_name='usageday',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='inventory.cluster'),
                ),
                migrations.AlterField(
                    model_name='usagehour',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='inventory.cluster'),
                ),
                migrations.AlterField(
                    model_name='workloadday',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='inventory.cluster'),
                ),
            ],
            database_operations=[drop_column_indexes(TABLES, "cluster_id")],
        ),
    ]
