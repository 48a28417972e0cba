"""Authentication: anonymous and bad tokens are 401, tokens are stored hashed and expire."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from io import StringIO

import pytest
import yaml
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken
from apps.accounts.services import add_team_member, create_api_token
from apps.inventory.models import Team

ENDPOINTS = [
    "/api/v1/usage/",
    "/api/v1/usage/?format=csv",
    "/api/v1/idle-allocations/",
    "/api/v1/teams/",
    "/api/v1/teams/vision/",
    "/api/v1/clusters/",
    "/api/v1/clusters/alpha/",
    "/api/v1/schema/",
    "/api/v1/docs/",
    "/api/v1/redoc/",
]


HTML_DOCS = ["/api/v1/docs/", "/api/v1/redoc/"]


@pytest.mark.parametrize("url", [u for u in ENDPOINTS if u not in HTML_DOCS])
def test_it_answers_401_to_anonymous_requests(ledger, anon, url):
    response = anon.get(url)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert set(yaml.safe_load(response.content)) == {"detail", "errors"}  # the schema answers YAML, the rest JSON


@pytest.mark.parametrize("url", HTML_DOCS)
def test_it_sends_anonymous_people_from_the_docs_to_sign_in_and_back(ledger, anon, url):
    response = anon.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={url}"


def test_redoc_loads_nothing_from_the_internet(users):
    from django.test import Client

    client = Client()
    client.force_login(users["alice"])
    page = client.get("/api/v1/redoc/").content.decode()
    assert "redoc" in page.lower() and "https://" not in page and "fonts.g" not in page


@pytest.mark.parametrize("url", ENDPOINTS)
def test_it_answers_401_to_an_unknown_token(ledger, url):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token gfo_not-a-real-token")
    assert client.get(url).status_code == 401


def test_it_answers_401_to_an_expired_token(ledger):
    user = User.objects.create_user("old", is_staff=True)
    token = create_api_token(user, 1)
    ApiToken.objects.filter(user=user).update(expires_at=timezone.now() - timedelta(seconds=1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.get("/api/v1/teams/")
    assert response.status_code == 401
    assert response.json() == {"detail": "Token has expired.", "errors": {}}


def test_it_answers_401_to_an_inactive_user(ledger):
    user = User.objects.create_user("gone", is_staff=True, is_active=False)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {create_api_token(user, 1)}")
    assert client.get("/api/v1/teams/").status_code == 401


def test_it_accepts_a_valid_token_and_records_its_use(ledger):
    user = User.objects.create_user("fresh", is_staff=True)
    token = create_api_token(user, 5)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/teams/").status_code == 200
    row = ApiToken.objects.get(user=user)
    assert row.last_used_at is not None
    assert timedelta(days=4, hours=23) < row.expires_at - timezone.now() <= timedelta(days=5)


def test_the_token_lookup_compiled_once_reads_what_the_orm_reads(db):
    """`token_by_digest` compiles its SQL once and fills in each request's digest: token after token (different
    users, teams, finance, expiry) it must give the same token and user fields as the ORM, the same visibility as
    the rule asks of the database, and nothing for a digest no token has or one shaped like SQL."""
    from django.contrib.auth.models import Group

    from apps.accounts.selectors import FINANCE_GROUP, token_by_digest
    from apps.accounts.tokens import token_digest

    finance = Group.objects.create(name=FINANCE_GROUP)
    vision, infra = Team.objects.create(name="vision"), Team.objects.create(name="infra")
    people = [User.objects.create_user("solo", email="s@example.com"),
              User.objects.create_user("two-teams", first_name="Ann"),
              User.objects.create_user("money", is_staff=False),
              User.objects.create_user("root", is_staff=True, is_superuser=True)]
    people[1].teams.add(vision, infra)
    people[2].teams.add(vision)
    people[2].groups.add(finance)
    tokens = [create_api_token(u, days) for u, days in zip(people, (1, 5, 30, 90), strict=True)]
    ApiToken.objects.filter(user=people[0]).update(last_used_at=timezone.now() - timedelta(hours=1))
    expected_teams = [set(), {"vision", "infra"}, {"vision"}, set()]
    for _round in range(2):  # the second round reads through the statement compiled in the first
        for user, token, teams in zip(people, tokens, expected_teams, strict=True):
            found = token_by_digest(token_digest(token))
            assert found is not None
            orm = ApiToken.objects.select_related("user").get(digest=token_digest(token))
            fields = [f.attname for f in ApiToken._meta.concrete_fields]
            assert [getattr(found.token, f) for f in fields] == [getattr(orm, f) for f in fields]
            user_fields = [f.attname for f in User._meta.concrete_fields]
            stored = User.objects.get(pk=user.pk)
            assert [getattr(found.token.user, f) for f in user_fields] == [getattr(stored, f) for f in user_fields]
            assert found.token.user.pk == user.pk and not found.token._state.adding
            assert found.teams == teams and found.in_finance == (user == people[2])
    for digest in (token_digest("gfo_unknown"), "' OR '1'='1", "%s", ""):
        assert token_by_digest(digest) is None


def test_it_stores_tokens_hashed(db):
    user = User.objects.create_user("hash")
    token = create_api_token(user, 1)
    row = ApiToken.objects.get(user=user)
    assert row.digest == hashlib.sha256(token.encode()).hexdigest()
    assert token not in {row.digest, row.prefix}
    assert token.startswith(row.prefix) and len(row.prefix) < len(token)
    for value in ApiToken.objects.values_list(flat=True):
        assert value != token


def test_it_accepts_a_browser_session(ledger):
    User.objects.create_user("browser", password="pw", is_staff=True)
    client = APIClient()
    assert client.post("/accounts/login/", {"username": "browser", "password": "pw"}).status_code == 302
    assert client.get("/api/v1/usage/?start=2026-11-23&end=2026-11-24").status_code == 200


def test_it_prints_only_the_token_from_create_api_token(db):
    User.objects.create_user("cli")
    out = StringIO()
    call_command("create_api_token", "cli", "--expires-days", "7", stdout=out)
    token = out.getvalue().strip()
    assert "\n" not in token and token.startswith("gfo_")
    assert ApiToken.objects.get().digest == hashlib.sha256(token.encode()).hexdigest()


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["nobody"], "no user"),
        (["cli", "--expires-days", "0"], "between 1 and 365"),
        (["cli", "--expires-days", "-5"], "between 1 and 365"),
        (["cli", "--expires-days", "99999999"], "between 1 and 365"),  # was a traceback (date overflow)
        (["cli", "--expires-days", "366"], "between 1 and 365"),
    ],
)
def test_it_fails_create_api_token_with_a_reason(db, args, reason):
    User.objects.create_user("cli")
    with pytest.raises(CommandError, match=reason):
        call_command("create_api_token", *args, stdout=StringIO())
    assert not ApiToken.objects.exists()


def test_it_revokes_tokens_by_prefix_or_all(db):
    user = User.objects.create_user("cli")
    first, second = create_api_token(user, 7), create_api_token(user, 7)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {first}")
    assert client.get("/api/v1/teams/").status_code == 200
    call_command("revoke_api_token", "cli", "--prefix", first[:12], stdout=StringIO())
    assert client.get("/api/v1/teams/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {second}")
    assert client.get("/api/v1/teams/").status_code == 200
    call_command("revoke_api_token", "cli", "--all", stdout=StringIO())
    assert client.get("/api/v1/teams/").status_code == 401
    with pytest.raises(CommandError, match="no matching token"):
        call_command("revoke_api_token", "cli", "--all", stdout=StringIO())


def test_it_adds_a_team_member_to_existing_teams_only_unless_asked_to_create(db):
    user = User.objects.create_user("lead")
    with pytest.raises(CommandError, match="No team named 'robotics'"):
        call_command("add_team_member", "robotics", "lead", stdout=StringIO())
    call_command("add_team_member", "robotics", "lead", "--create", stdout=StringIO())
    assert list(Team.objects.get(name="robotics").members.all()) == [user]
    add_team_member("robotics", "lead")  # idempotent
    assert Team.objects.get(name="robotics").members.count() == 1
    with pytest.raises(CommandError):
        call_command("add_team_member", "robotics", "nobody", stdout=StringIO())
    with pytest.raises(CommandError, match="not a valid team name"):
        call_command("add_team_member", "<b>x</b>", "lead", "--create", stdout=StringIO())


def test_it_adds_a_person_with_teams_and_finance(db, monkeypatch):
    Team.objects.create(name="vision")
    monkeypatch.setenv("GPUFINOPS_PASSWORD", "a-long-enough-pass-8271")
    call_command("add_user", "fin", "--email", "fin@example.com", "--finance", stdout=StringIO())
    call_command("add_user", "lead", "--team", "vision", stdout=StringIO())
    fin, lead = User.objects.get(username="fin"), User.objects.get(username="lead")
    assert fin.check_password("a-long-enough-pass-8271") and fin.groups.filter(name="finance").exists()
    assert list(lead.teams.values_list("name", flat=True)) == ["vision"]
    with pytest.raises(CommandError, match="No team named 'nope'"):
        call_command("add_user", "x", "--team", "nope", stdout=StringIO())
