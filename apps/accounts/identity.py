"""The identity provider's groups -> gpufinops teams and roles (pure: plain data in, plain data out).

A group names a team through the table GPUFINOPS_OIDC_GROUP_TEAMS (group -> team) or the pattern
GPUFINOPS_OIDC_TEAM_GROUP_PATTERN (a regular expression whose `team` group is the team name); groups listed in
GPUFINOPS_OIDC_FINANCE_GROUPS give the finance role (every team), in GPUFINOPS_OIDC_STAFF_GROUPS staff (every
team and the admin). A team name that is not a valid label value is dropped, as everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from apps.inventory.teams import is_valid_team_name


@dataclass(frozen=True)
class Roles:
    teams: frozenset[str]
    finance: bool
    staff: bool


def roles_from_groups(
    groups: Iterable[object], *, table: Mapping[str, str], pattern: str, finance_groups: Iterable[str],
    staff_groups: Iterable[str],
) -> Roles:
    """What the groups of one sign-in grant. Non-string groups (a hostile or odd claim) are ignored."""
    names = {g for g in groups if isinstance(g, str)}
    teams = {table[g] for g in names if g in table}
    if pattern:
        compiled = re.compile(pattern)
        for group in names:
            found = compiled.fullmatch(group)
            if found and found.groupdict().get("team"):
                teams.add(found.group("team"))
    return Roles(
        teams=frozenset(t for t in teams if is_valid_team_name(t)),
        finance=bool(names & set(finance_groups)),
        staff=bool(names & set(staff_groups)),
    )


def groups_claim(claims: Mapping[str, object], name: str) -> list[object]:
    """The groups claim as a list ([] when absent; one string becomes a list of one)."""
    value = claims.get(name)
    if isinstance(value, str):
        return [value]
    return list(value) if isinstance(value, list | tuple) else []
