"""Pending work keeps the physical-GPU equivalent of one unit of its resource, decided at the collection from the
nodes offering it (apps.capacity.pending.unit_share). Rows recorded before keep the figure they were counted with
then: a MIG slice of 7, anything else one GPU (what GPU-hours waited used to assume for every node)."""

from django.db import migrations, models

from apps.inventory.gpus import UNKNOWN_NODE


def share_as_counted_before(apps, schema_editor):
    PendingWork = apps.get_model("capacity", "PendingWork")
    mig = PendingWork.objects.filter(resource__startswith="nvidia.com/mig-").order_by()
    for resource in mig.values_list("resource", flat=True).distinct():
        share = UNKNOWN_NODE.unit_share(resource)
        if share is not None:
            PendingWork.objects.filter(resource=resource).update(share=share)


class Migration(migrations.Migration):

    dependencies = [
        ('capacity', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='pendingwork',
            name='share',
            field=models.FloatField(default=1.0),
        ),
        migrations.RunPython(share_as_counted_before, migrations.RunPython.noop),
    ]
