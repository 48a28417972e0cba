"""Writes for accounts: issuing and revoking API tokens, people, and team membership."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from apps.accounts.identity import Roles
from apps.accounts.models import ApiToken
from apps.accounts.selectors import FINANCE_GROUP
from apps.accounts.tokens import PREFIX_LENGTH, new_token, token_digest
from apps.inventory.models import Team
from apps.inventory.teams import is_valid_team_name


def create_api_token(user: User, expires_days: int | None = None) -> str:
    """Issues a token for `user`, valid `expires_days` days (default `GPUFINOPS_API_TOKEN_DAYS`, at most
    `GPUFINOPS_API_TOKEN_MAX_DAYS`).

    Returns the plain token; only its SHA-256 digest is stored, so it cannot be shown again.
    """
    longest = settings.GPUFINOPS_API_TOKEN_MAX_DAYS
    if expires_days is None:
        expires_days = min(settings.GPUFINOPS_API_TOKEN_DAYS, longest)
    if not 1 <= expires_days <= longest:
        message = f"Must be between 1 and {longest} days (GPUFINOPS_API_TOKEN_MAX_DAYS)."
        raise ValidationError({"expires_days": [message]})
    token = new_token()
    ApiToken.objects.create(
        user=user,
        prefix=token[:PREFIX_LENGTH],
        digest=token_digest(token),
        expires_at=timezone.now() + timedelta(days=expires_days),
    )
    return token


def revoke_api_tokens(user: User, *, prefix: str | None = None) -> int:
    """Deletes the user's tokens (all, or the one(s) starting with `prefix`); returns how many."""
    tokens = ApiToken.objects.filter(user=user)
    if prefix is not None:
        if len(prefix) < 6:
            raise ValidationError({"prefix": ["Give at least 6 characters of the token (e.g. gfo_Ab)."]})
        tokens = tokens.filter(prefix__startswith=prefix[:PREFIX_LENGTH])
    return tokens.delete()[0]


def get_user(username: str) -> User:
    user_model = get_user_model()
    try:
        return user_model.objects.get(**{user_model.USERNAME_FIELD: username})
    except user_model.DoesNotExist as exc:
        raise ValidationError({"username": [f"No user named {username!r}."]}) from exc


def _team(team_name: str, *, create: bool) -> Team:
    team_name = team_name.strip()
    if not is_valid_team_name(team_name):
        raise ValidationError({"team": [f"{team_name[:80]!r} is not a valid team name (a Kubernetes label value)."]})
    team = Team.objects.filter(name=team_name).first()
    if team is None:
        if not create:
            raise ValidationError({"team": [f"No team named {team_name!r} (add --create to create it)."]})
        team = Team.objects.create(name=team_name)
    return team


@transaction.atomic
def add_team_member(team_name: str, username: str, *, create: bool = False) -> Team:
    """Makes `username` a member of team `team_name`.

    An unknown team is refused unless `create` (teams normally appear when labels name them, so a typo
    must not silently create an empty team that grants nothing).
    """
    user = get_user(username)
    team = _team(team_name, create=create)
    team.members.add(user)
    return team


@transaction.atomic
def add_user(
    username: str, *, password: str | None, email: str = "", teams: Sequence[str] = (), finance: bool = False,
    staff: bool = False,
) -> User:
    """Creates or updates a person: password (when given), e-mail, team memberships (existing teams only),
    the `finance` group (sees every team) and staff (sees every team, and the admin)."""
    user_model = get_user_model()
    if not username or len(username) > 150:
        raise ValidationError({"username": ["A username is 1 to 150 characters."]})
    if email:
        validate_email(email)
    found = [_team(t, create=False) for t in teams]
    lookup: dict[str, Any] = {user_model.USERNAME_FIELD: username}
    user, _ = user_model.objects.get_or_create(**lookup)
    if password:
        validate_password(password, user)
        user.set_password(password)
    elif not user.has_usable_password() and not user.password:
        user.set_unusable_password()
    user.email = email or user.email
    user.is_staff = staff or user.is_staff
    user.save()
    for team in found:
        team.members.add(user)
    if finance:
        user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    return user


@transaction.atomic
def sync_identity(username: str, *, email: str, roles: Roles) -> User:
    """A person signed in through the identity provider: create them if new (no usable password: the provider
    is their only way in), then make their teams, finance and staff roles exactly what the provider's groups
    grant now; a group gone since the last sign-in takes its access with it."""
    user_model = get_user_model()
    lookup: dict[str, Any] = {user_model.USERNAME_FIELD: username}
    user, created = user_model.objects.get_or_create(**lookup)
    if created:
        user.set_unusable_password()
    user.email = email[:254] if email else user.email
    user.is_staff = user.is_superuser = roles.staff
    user.save()
    teams = []
    for name in sorted(roles.teams):
        teams.append(Team.objects.get_or_create(name=name)[0])
    user.teams.set(teams)
    finance = Group.objects.get_or_create(name=FINANCE_GROUP)[0]
    if roles.finance:
        user.groups.add(finance)
    else:
        user.groups.remove(finance)
    return user
