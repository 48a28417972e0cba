"""Who may see what: the one rule every API endpoint and dashboard applies (interfaces.md)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User

FINANCE_GROUP = "finance"


def sees_all_teams(user: User | AnonymousUser) -> bool:
    """Staff and members of the `finance` group see every team."""
    if not user.is_authenticated:
        return False
    return bool(user.is_staff or user.is_superuser or user.groups.filter(name=FINANCE_GROUP).exists())


def visible_team_names(user: User | AnonymousUser) -> set[str] | None:
    """Team names the user may see; None means every team (including ones not yet in the Team table)."""
    if sees_all_teams(user):
        return None
    if not user.is_authenticated:
        return set()
    return set(user.teams.values_list("name", flat=True))


def history_days(user: User | AnonymousUser) -> int:
    """The longest range of snapshot history (fragmentation, pending counts) one request may ask for: team
    members get `GPUFINOPS_API_MEMBER_HISTORY_DAYS`, callers who see every team `GPUFINOPS_API_MAX_HISTORY_DAYS`."""
    if sees_all_teams(user):
        return settings.GPUFINOPS_API_MAX_HISTORY_DAYS
    return min(settings.GPUFINOPS_API_MEMBER_HISTORY_DAYS, settings.GPUFINOPS_API_MAX_HISTORY_DAYS)
