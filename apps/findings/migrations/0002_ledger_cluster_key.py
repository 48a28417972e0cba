"""The ledger tables' cluster foreign keys lose their own index (apps.usage.models.ClusterKey): each table's
unique key starts with the cluster and serves those lookups. In the database only the
indexes are dropped (apps.common.schema); the keys' constraints stay as they are."""

import django.db.models.deletion
from django.db import migrations, models

from apps.common.schema import drop_column_indexes

TABLES = ['findings_finding', 'findings_findinghour']


class Migration(migrations.Migration):

    dependencies = [
        ('findings', '0001_initial'),
        ('inventory', '0005_team_name_is_a_label_value'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='finding',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='inventory.cluster'),
                ),
                migrations.AlterField(
                    model_name='findinghour',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='inventory.cluster'),
                ),
            ],
            database_operations=[drop_column_indexes(TABLES, "cluster_id")],
        ),
    ]
