"""Who may see what: the one rule every API endpoint and dashboard applies (interfaces.md)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User

FINANCE_GROUP = "finance"


# The attribute of a request's user object where token authentication leaves what it read in the same query.
_VISIBILITY = "_gpufinops_visibility"


def remember_visibility(user: User, *, finance: bool, teams: set[str]) -> None:
    """Keep, on this user object (one request's), whether it is in the finance group and its teams, as read with
    its token (apps/accounts/authentication.py): the rule below then asks the database nothing more."""
    setattr(user, _VISIBILITY, (bool(finance), frozenset(teams)))


def sees_all_teams(user: User | AnonymousUser) -> bool:
    """Staff and members of the `finance` group see every team."""
    if not user.is_authenticated:
        return False
    if user.is_staff or user.is_superuser:
        return True
    known = getattr(user, _VISIBILITY, None)
    if known is not None:
        return known[0]
    return bool(user.groups.filter(name=FINANCE_GROUP).exists())


def visible_team_names(user: User | AnonymousUser) -> set[str] | None:
    """Team names the user may see; None means every team (including ones not yet in the Team table)."""
    if sees_all_teams(user):
        return None
    if not user.is_authenticated:
        return set()
    known = getattr(user, _VISIBILITY, None)
    if known is not None:
        return set(known[1])
    return set(user.teams.values_list("name", flat=True))


def history_days(user: User | AnonymousUser) -> int:
    """The longest range of snapshot history (fragmentation, pending counts) one request may ask for: team
    members get `GPUFINOPS_API_MEMBER_HISTORY_DAYS`, callers who see every team `GPUFINOPS_API_MAX_HISTORY_DAYS`."""
    if sees_all_teams(user):
        return settings.GPUFINOPS_API_MAX_HISTORY_DAYS
    return min(settings.GPUFINOPS_API_MEMBER_HISTORY_DAYS, settings.GPUFINOPS_API_MAX_HISTORY_DAYS)
