"""Who may see what: the one rule every API endpoint and dashboard applies (interfaces.md)."""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, Group, User
from django.db import connection
from django.db.models import Exists, F, OuterRef

from apps.accounts.models import ApiToken
from apps.common.statements import Markers, RowShape, Template

FINANCE_GROUP = "finance"


# The attribute of a request's user object where token authentication leaves what it read in the same query.
_VISIBILITY = "_gpufinops_visibility"


def remember_visibility(user: User, *, finance: bool, teams: Set[str]) -> None:
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


@dataclass(frozen=True)
class TokenHolder:
    """A token found by its digest, with its user (`token.user`) and what the user may see."""

    token: ApiToken
    in_finance: bool
    teams: frozenset[str]


_TOKEN_FIELDS = tuple(f.attname for f in ApiToken._meta.concrete_fields)
_USER_FIELDS = tuple(f.attname for f in User._meta.concrete_fields)


@dataclass(frozen=True)
class _TokenStatement:
    template: Template
    shape: RowShape


@lru_cache(maxsize=4)
def _token_statement(alias: str, vendor: str) -> _TokenStatement:
    """The token lookup's SQL, compiled once per database (`apps.common.statements`): every API request asks it
    with another digest only, and compiling the queryset again was about a fifth of an authentication's CPU."""
    found: dict[str, RowShape] = {}

    def build(markers: Markers) -> tuple[str, list]:
        qs = (ApiToken.objects.using(alias).filter(digest=markers.text("digest"))
              .annotate(in_finance=Exists(Group.objects.filter(name=FINANCE_GROUP, user=OuterRef("user_id"))),
                        team_name=F("user__teams__name"))
              .values_list(*_TOKEN_FIELDS, *(f"user__{a}" for a in _USER_FIELDS), "in_finance", "team_name")
              .order_by())
        shape, sql, params = RowShape.of(qs)
        found["shape"] = shape
        return sql, list(params)

    template = Template.compile(build)
    return _TokenStatement(template, found["shape"])


def token_by_digest(digest: str) -> TokenHolder | None:
    """The token with this digest, its user and the user's visibility (finance group, teams) in one query; None
    when no token has it. One row per team of the user (one with no team name when it has none)."""
    statement = _token_statement(connection.alias, connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(statement.template.sql, statement.template.params({"digest": digest}))
        rows = statement.shape.tuples(cursor.fetchall())
    if not rows:
        return None
    first, n = rows[0], len(_TOKEN_FIELDS)
    token = ApiToken.from_db(connection.alias, _TOKEN_FIELDS, first[:n])
    token.user = User.from_db(connection.alias, _USER_FIELDS, first[n:n + len(_USER_FIELDS)])
    return TokenHolder(token, bool(first[-2]), frozenset(r[-1] for r in rows if r[-1] is not None))
