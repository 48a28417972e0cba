"""Writes for accounts: issuing API tokens and granting team membership."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import ApiToken
from apps.accounts.tokens import PREFIX_LENGTH, new_token, token_digest
from apps.inventory.models import Team

DEFAULT_TOKEN_DAYS = 90


def create_api_token(user: AbstractBaseUser, expires_days: int | None = None) -> str:
    """Issues a token for `user`, valid `expires_days` days (default `GPUFINOPS_API_TOKEN_DAYS`, 90).

    Returns the plain token; only its SHA-256 digest is stored, so it cannot be shown again.
    """
    if expires_days is None:
        expires_days = getattr(settings, "GPUFINOPS_API_TOKEN_DAYS", DEFAULT_TOKEN_DAYS)
    if expires_days < 1:
        raise ValidationError({"expires_days": ["Must be at least 1 day."]})
    token = new_token()
    ApiToken.objects.create(
        user=user,
        prefix=token[:PREFIX_LENGTH],
        digest=token_digest(token),
        expires_at=timezone.now() + timedelta(days=expires_days),
    )
    return token


@transaction.atomic
def add_team_member(team_name: str, username: str) -> Team:
    """Makes `username` a member of team `team_name`, creating the team row when labels named it first.

    Teams are named by pod and namespace labels, so a team can have hours before anyone created
    its row; granting access must not wait for that.
    """
    user_model = get_user_model()
    try:
        user = user_model.objects.get(**{user_model.USERNAME_FIELD: username})
    except user_model.DoesNotExist as exc:
        raise ValidationError({"username": [f"No user named {username!r}."]}) from exc
    team_name = team_name.strip()
    if not team_name or len(team_name) > Team._meta.get_field("name").max_length:
        raise ValidationError({"team": ["A team name is 1 to 100 characters."]})
    team, _ = Team.objects.get_or_create(name=team_name)
    team.members.add(user)
    return team
