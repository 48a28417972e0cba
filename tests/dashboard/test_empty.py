"""Empty, partial and hidden states (reference §4.4): "none" is told apart from "not visible to you" and from "not
collected yet", and "not measured" is never shown as 0 %. Each test writes its own small ledger."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.inventory.models import Cluster
from apps.usage.models import UsageHour
from apps.usage.services import rollup_day

pytestmark = pytest.mark.django_db


def usage(cluster, team, *, working=1.0, idle=3.0, unmeasured=0.0, hours_ago=3, namespace="ns"):
    from apps.inventory.services import record_teams

    hour = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours_ago)
    UsageHour.objects.create(cluster=cluster, hour=hour, team=team, namespace=namespace, node_group="g",
                             gpu_model="NVIDIA-L4", allocated_gpu_hours=working + idle + unmeasured,
                             working_sm_active=working, idle_sm_active=idle, unmeasured_sm_active=unmeasured,
                             cost=Decimal("0.8") * Decimal(str(working + idle + unmeasured)),
                             idle_cost_sm_active=Decimal("0.8") * Decimal(str(idle)))
    rollup_day(cluster, hour.date())
    record_teams(cluster, {team}, hour)


@pytest.fixture
def member(client, django_user_model):
    from apps.accounts.services import add_team_member

    user = django_user_model.objects.create_user("mia")
    add_team_member("vision", "mia", create=True)
    client.force_login(user)
    return client


def test_the_sign_in_page_is_served_with_its_csrf_token(client):
    body = client.get("/accounts/login/").content.decode()
    assert 'name="csrfmiddlewaretoken"' in body and 'name="username"' in body


def test_a_cluster_with_nothing_collected_says_not_collected_yet(member):
    cluster = Cluster.objects.create(name="fresh")
    usage(cluster, "vision")  # the team appears in the cluster; no queue or capacity snapshot was taken
    body = member.get("/queues/").content.decode()
    assert "Not collected yet: no queue snapshot has been taken" in body
    body = member.get("/capacity/").content.decode()
    assert "Not collected yet" in body


def test_activity_of_unmeasured_hours_is_not_measured_never_zero(member):
    usage(Cluster.objects.create(name="dark"), "vision", working=0.0, idle=0.0, unmeasured=4.0)
    body = member.get("/").content.decode()
    assert "not measured" in body
    assert 'data-raw="None">not measured' in body
    assert "0.0 %" not in body.split("Activity (SM active)")[1][:200]


def test_a_filter_that_matches_nothing_says_so_and_offers_to_clear_it(member):
    usage(Cluster.objects.create(name="c1"), "vision")
    body = member.get("/workloads/?namespace=nope").content.decode()
    assert "No GPU-hours match namespace nope" in body
    assert "No workloads match the filters" in body and "Clear filters" in body


def test_the_fleet_is_explained_to_those_who_may_not_see_it(member):
    usage(Cluster.objects.create(name="c2"), "vision")
    response = member.get("/fleet/")
    assert response.status_code == 403
    assert "finance and platform administrators only" in response.content.decode()
