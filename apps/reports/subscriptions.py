"""Report subscriptions belong to a person and cover only teams that person may see (issue 11).

The rule, checked when a subscription is made (command, admin) and again at every send:

* the person is a user with that e-mail address (exactly one, active);
* each named team exists and the person may see it (finance and staff see every team; anyone else the teams
  they are a member of): an unknown or invisible team is refused with the reason;
* no team named means every team the person may see, recomputed at send time: all teams with the fleet's
  capacity for finance and staff, their own teams for a team lead (who stops receiving a team the day they
  leave it), and for a person on no team nothing at all. Blank never means "every team" by accident.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from apps.accounts.selectors import visible_team_names
from apps.inventory.models import Team
from apps.reports.content import Scope
from apps.reports.models import Cadence, ReportSubscription


def person_for_email(email: str):
    """The one active user with this e-mail address (case-insensitive), or ValidationError saying why not."""
    try:
        validate_email(email)
    except ValidationError as exc:
        raise ValidationError({"email": [f"not an e-mail address: {email!r}"]}) from exc
    users = list(get_user_model().objects.filter(email__iexact=email, is_active=True)[:2])
    if not users:
        raise ValidationError({"email": [
            f"no person has the e-mail address {email}: create one first "
            f"(manage.py add_user USERNAME --email {email} [--team T] [--finance])"]})
    if len(users) > 1:
        raise ValidationError({"email": [f"several people have the e-mail address {email}: make it unique"]})
    return users[0]


def check_scope(user, teams: Iterable[str]) -> None:
    """Refuses unknown teams, teams the person may not see, and an empty scope for a person on no team."""
    names = sorted({str(t).strip() for t in teams})
    if any(not n for n in names):
        raise ValidationError({"teams": ["an empty team name"]})
    known = set(Team.objects.filter(name__in=names).values_list("name", flat=True))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValidationError({"teams": [f"unknown team(s): {', '.join(unknown)}"]})
    visible = visible_team_names(user)
    if visible is None:
        return
    hidden = [n for n in names if n not in visible]
    if hidden:
        raise ValidationError({"teams": [
            f"{user.get_username()} may not see team(s) {', '.join(hidden)} (not a member, not finance or staff)"]})
    if not names and not visible:
        raise ValidationError({"teams": [
            f"{user.get_username()} is on no team and not finance or staff: there is nothing to send them"]})


def subscribe(
    email: str, teams: Iterable[str] = (), *, cadence: str = Cadence.WEEKLY
) -> tuple[ReportSubscription, bool]:
    """Creates (or updates the teams of) the person's weekly or monthly subscription."""
    if cadence not in Cadence.values:
        raise ValidationError({"cadence": [f"one of {', '.join(Cadence.values)}"]})
    user = person_for_email(email)
    names = sorted({str(t).strip() for t in teams})
    check_scope(user, names)
    sub, created = ReportSubscription.objects.update_or_create(
        user=user, cadence=cadence, defaults={"teams": names, "active": True, "email": user.email},
    )
    return sub, created


def resolve_scope(sub: ReportSubscription) -> tuple[Scope | None, str]:
    """The scope to send `sub` now, or (None, why nothing is sent). Never wider than the person may see."""
    user = sub.user
    if user is None:
        return None, "the subscription belongs to no person"
    if not user.is_active:
        return None, f"{user.get_username()} is deactivated"
    if not user.email:
        return None, f"{user.get_username()} has no e-mail address"
    visible = visible_team_names(user)
    named = set(sub.team_names)
    if named:
        if visible is not None:
            named &= visible
        named &= set(Team.objects.filter(name__in=sorted(named)).values_list("name", flat=True))
        if not named:
            return None, f"{user.get_username()} may no longer see any of the subscribed teams"
        return Scope(frozenset(named)), ""
    if visible is None:
        return Scope(None), ""
    if not visible:
        return None, f"{user.get_username()} is on no team"
    return Scope(frozenset(visible)), ""


def deactivate(sub: ReportSubscription) -> None:
    """Stops the subscription's e-mails: deactivated, not deleted, so the record of what was sent stays."""
    if sub.active:
        sub.active = False
        sub.save(update_fields=["active"])
