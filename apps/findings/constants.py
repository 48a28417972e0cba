"""Fixed names of the findings app: the kinds (docs/findings.md, interfaces.md), apart from the models so the
pure rules (`rules.py`) can name them without importing the tables."""

from __future__ import annotations

from django.db import models


class Kind(models.TextChoices):
    IDLE_ALLOCATION = "idle_allocation"
    IDLE_HELD = "idle_held"
    UNHEALTHY_GPU = "unhealthy_gpu"
    STRAGGLER = "straggler"
    UNATTRIBUTED_ACTIVITY = "unattributed_activity"
    ZERO_ALLOCATABLE_NODE = "zero_allocatable_node"
    BORROWED_IDLE = "borrowed_idle"
    MISSING_SIGNAL = "missing_signal"
    TEAM_LABEL_REJECTED = "team_label_rejected"
    # GPUs handed out by DRA claims and HAMi fractions (accelerator_rules.py)
    IDLE_CLAIM = "idle_claim"
    OVERSUBSCRIBED_GPU = "oversubscribed_gpu"
    MISSING_ATTRIBUTION = "missing_attribution"


# An idle allocation is either kind: `/api/v1/idle-allocations/` lists both, and both wait the same hours.
IDLE_KINDS = (Kind.IDLE_ALLOCATION, Kind.IDLE_HELD)
