"""Small doors closed (issue 23): no links in tenant names in the browsable API, no stored answers for
signed-in people."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from apps.accounts.services import create_api_token
from apps.inventory.models import Cluster, Team
from apps.inventory.services import record_teams
from apps.usage.models import UsageHour
from apps.usage.services import rollup_day

DAY = datetime(2026, 11, 23, tzinfo=UTC)
TENANT_NAMES = ["evil.example.com", "www.phish-bank.com", "click.here.net"]  # all valid label values


@pytest.fixture
def staff(db):
    cluster = Cluster.objects.create(name="prod")
    for team in TENANT_NAMES:
        UsageHour.objects.create(cluster=cluster, hour=DAY, team=team, namespace=team, node_group="g",
                                 gpu_model="NVIDIA-H100-80GB-HBM3", allocated_gpu_hours=2, cost=Decimal("8"))
        Team.objects.get_or_create(name=team)
    rollup_day(cluster, DAY.date())
    record_teams(cluster, TENANT_NAMES, DAY)
    return User.objects.create_user("staff", password="pw-staff-123456", is_staff=True, is_superuser=True)


def test_the_browsable_api_links_no_url_in_tenant_names(staff):
    client = Client()
    client.force_login(staff)
    for page in ("/api/v1/teams/", "/api/v1/usage/?start=2026-11-23&end=2026-11-24&group_by=team"):
        body = client.get(page, HTTP_ACCEPT="text/html").content.decode()
        for name in TENANT_NAMES:
            assert name in body, (page, name)
            assert f'href="http://{name}' not in body and f">{name}</a>" not in body, (page, name)


@pytest.mark.parametrize("page", ["/", "/teams/", "/api/v1/teams/", "/admin/", "/data-status/"])
def test_signed_in_answers_are_never_stored(staff, page):
    client = Client()
    client.force_login(staff)
    response = client.get(page)
    assert response.status_code == 200, page
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]


def test_token_answers_are_never_stored(staff):
    token = create_api_token(staff, 30)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = api.get("/api/v1/teams/")
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
