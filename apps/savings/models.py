"""The one figure savings needs that the ledger does not keep: how much framebuffer each pod used per hour, for
right-sizing (docs/savings.md). Everything else a saving rests on is read from the ledger and the findings."""

from __future__ import annotations

from django.db import models

from apps.inventory.models import Cluster


class PodMemoryHour(models.Model):
    """A pod's framebuffer in one ledger hour: the largest of its devices' hourly averages of
    `DCGM_FI_DEV_FB_USED` (MiB), read with the bucket from the same source (replaced whole with the bucket)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, db_index=False)
    hour = models.DateTimeField()
    namespace = models.CharField(max_length=253)
    pod = models.CharField(max_length=253)
    fb_used_mib = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "hour", "namespace", "pod"],
                                               name="uniq_podmemoryhour")]
