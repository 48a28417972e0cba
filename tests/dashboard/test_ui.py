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
