"""The dashboards in a real headless Chromium, over a ledger collected from the simulated cluster."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client

PLOTS = "document.querySelectorAll('.js-plotly-plot .main-svg').length"


@pytest.fixture
def signed_in(live_server, browser, django_user_model):
    call_command("demo", "--days", "1")
    user = django_user_model.objects.create_user("lead", password="pw-123456789", is_staff=True)
    client = Client()
    client.force_login(user)
    browser.set_cookie("sessionid", client.cookies["sessionid"].value, live_server.url)
    return browser


@pytest.mark.django_db(transaction=True)
def test_it_draws_the_overview_charts_and_tables(signed_in, live_server, tmp_path):
    signed_in.goto(live_server.url + "/?days=1")
    signed_in.wait_for(f"{PLOTS} >= 2")
    text = signed_in.eval("document.body.innerText")
    assert "Allocated GPU-hours" in text and "Idle allocations" in text
    assert "Busy (SM active)" in text and "Busy (naive GPU_UTIL)" in text
    for team in ("research", "serving", "unassigned"):
        assert team in text
    bars = signed_in.eval("document.querySelectorAll('#chart-daily .bars .point').length")
    assert bars >= 3  # working, idle and unmeasured for at least one day
    signed_in.screenshot(tmp_path / "overview.png")


@pytest.mark.django_db(transaction=True)
def test_it_draws_capacity_and_queues(signed_in, live_server):
    signed_in.goto(live_server.url + "/capacity/?days=1")
    signed_in.wait_for(f"{PLOTS} >= 1")
    text = signed_in.eval("document.body.innerText")
    assert "h100-train" in text and "Largest block" in text
    assert "fragmentation" in text  # a pending pod diagnosed as such in the demo
    signed_in.goto(live_server.url + "/queues/?days=1")
    text = signed_in.eval("document.body.innerText")
    assert "research-cq" in text and "gpu-cohort" in text


HOSTILE_TEAM = '<a href="https://evil.example/login">Re-authenticate here</a>'


@pytest.mark.django_db(transaction=True)
def test_a_hostile_team_name_is_shown_as_text_not_a_link_under_the_csp(live_server, browser, django_user_model):
    """Rows written before team names were validated (or by any other path): the chart and the table show the
    name as typed, and nothing on the page links to the attacker."""
    from datetime import timedelta
    from decimal import Decimal

    from django.utils import timezone

    from apps.inventory.models import Cluster
    from apps.usage.models import UsageHour
    from apps.usage.services import rollup_day

    cluster = Cluster.objects.create(name="prod")
    hour = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    for team in (HOSTILE_TEAM, "vision"):
        UsageHour.objects.create(cluster=cluster, hour=hour, team=team, namespace="ns", node_group="g",
                                 gpu_model="NVIDIA-L4", allocated_gpu_hours=4, working_sm_active=1,
                                 idle_sm_active=3, cost=Decimal("3.2"))
    rollup_day(cluster, hour.date())
    user = django_user_model.objects.create_user("fin", is_staff=True)
    client = Client()
    client.force_login(user)
    browser.set_cookie("sessionid", client.cookies["sessionid"].value, live_server.url)
    browser.goto(live_server.url + "/?days=1")
    browser.wait_for(f"{PLOTS} >= 2")
    assert browser.eval("document.querySelectorAll('a[href*=\"evil.example\"]').length") == 0
    assert browser.eval("document.querySelectorAll('svg a').length") == 0
    ticks = browser.eval("Array.from(document.querySelectorAll('#chart-teams .ytick text')).map(t => t.textContent)")
    assert HOSTILE_TEAM in ticks  # shown exactly as written
    assert HOSTILE_TEAM in browser.eval("document.body.innerText")


@pytest.mark.django_db(transaction=True)
def test_the_api_docs_render_offline(live_server, browser, django_user_model):
    user = django_user_model.objects.create_user("dev", is_staff=True)
    client = Client()
    client.force_login(user)
    browser.set_cookie("sessionid", client.cookies["sessionid"].value, live_server.url)
    browser.goto(live_server.url + "/api/v1/docs/")
    browser.wait_for("document.querySelectorAll('.opblock').length > 5", timeout=30)
    assert "/api/v1/usage/" in browser.eval("document.body.innerText")
