"""Budgets and their alerts against a real SMTP server (aiosmtpd) and a local webhook receiver: one alert per
threshold and recipient, none repeated when the same hours are collected again; set_budget, the API, the page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from apps.budgets.models import BudgetAlert
from apps.budgets.services import check_budgets, set_budget
from apps.findings.models import TeamChannel
from apps.inventory.models import Cluster, Team
from tests.billing.helpers import N, write_hour
from tests.findings.webhook import WebhookReceiver

pytestmark = pytest.mark.django_db

MONDAY = datetime(2026, 11, 23, tzinfo=UTC)  # 2026-W48
NODE = N("n1", "", gpus=8)
VISION = [("u-vision", "vision", "n1", 4)]  # 4 GPUs at 2.50: 10.00 an hour


@pytest.fixture
def world(db):
    cluster = Cluster.objects.create(name="prod")
    team = Team.objects.create(name="vision")
    lead = User.objects.create_user("vlead", email="vision-lead@example.com")
    team.members.add(lead)
    return cluster, team, lead


@pytest.fixture
def webhook(world):
    receiver = WebhookReceiver()
    channel = TeamChannel(team=world[1], name="chat")
    channel.url = receiver.url
    channel.save()
    yield receiver
    receiver.close()


def _hours(cluster: Cluster, first: datetime, n: int) -> None:
    for i in range(n):
        write_hour(cluster, first + timedelta(hours=i), [NODE], pods=VISION)


@pytest.mark.services
def test_one_alert_per_threshold_and_recipient_never_repeated(world, webhook, smtp_settings):
    cluster, _, _ = world
    set_budget("vision", Decimal("100"), period="weekly")
    _hours(cluster, MONDAY, 9)  # 90.00 spent: past 80 %
    now = MONDAY + timedelta(hours=9, minutes=5)
    report = check_budgets(now)
    assert (report.planned, report.sent, report.failed) == (2, 2, 0)  # the lead's e-mail, the team's webhook
    (mail,) = smtp_settings.messages
    assert mail.rcpt_tos == ["vision-lead@example.com"]
    subject = str(mail.message["Subject"])
    assert subject == "[gpufinops budget] vision 2026-W48: spent past 80 % of 100.00 USD"
    body = mail.message.get_body(("plain",)).get_content()
    assert "Team vision has spent 90.00 USD of its weekly budget of 100.00 USD for 2026-W48: past 80 %." in body
    (hook,) = webhook.received
    assert hook["budget"]["threshold"] == 80 and hook["budget"]["basis"] == "actual"
    assert hook["budget"]["spend"] == "90.00"

    # The same hour collected again, and the check run again: nothing new.
    write_hour(cluster, MONDAY + timedelta(hours=8), [NODE], pods=VISION)
    assert check_budgets(now + timedelta(minutes=5)).planned == 0
    assert len(smtp_settings.messages) == 1 and len(webhook.received) == 1

    # One more hour: 100.00, past 100 %: its own alert, once; 80 % is not told again.
    _hours(cluster, MONDAY + timedelta(hours=9), 1)
    assert check_budgets(now + timedelta(hours=1)).sent == 2
    assert check_budgets(now + timedelta(hours=1, minutes=5)).sent == 0
    assert sorted(BudgetAlert.objects.values_list("threshold", "channel")) == [
        (80, "email"), (80, "webhook"), (100, "email"), (100, "webhook")]
    assert "past 100 %" in str(smtp_settings.messages[-1].message["Subject"])


@pytest.mark.services
def test_a_failed_webhook_is_retried_and_the_forecast_alerts_once_it_has_history(world, webhook, smtp_settings):
    """Four days of 240 (10.00 an hour) from 2 Nov: at 6 Nov 00:00, 960 spent and 25 days left at 240 a day:
    forecast 6960.00, 87 % of 8000: the 80 % forecast threshold, not the actual one (12 %)."""
    cluster, _, _ = world
    set_budget("vision", Decimal("8000"), period="monthly")
    _hours(cluster, datetime(2026, 11, 2, tzinfo=UTC), 96)
    webhook.fail_next = 1
    now = datetime(2026, 11, 6, tzinfo=UTC)
    report = check_budgets(now)
    assert (report.planned, report.sent, report.failed) == (2, 1, 1)
    alert = BudgetAlert.objects.get(channel="webhook")
    assert (alert.basis, alert.threshold, alert.forecast, alert.spend) == ("forecast", 80, Decimal("6960.00"),
                                                                           Decimal("960"))
    assert alert.status == "pending" and alert.next_attempt_at == now + timedelta(minutes=1)
    assert check_budgets(now + timedelta(minutes=2)).sent == 1
    assert webhook.received[0]["budget"]["forecast"] == "6960.00"
    assert "forecast past 80 % of 8000.00 USD" in str(smtp_settings.messages[0].message["Subject"])


def test_set_budget_the_api_and_the_page(world):
    cluster, team, lead = world
    out = StringIO()
    call_command("set_budget", "vision", "500", "--period", "weekly", "--thresholds", "50,100", stdout=out)
    assert "vision weekly 500.00 USD: thresholds 50 %, 100 %" in out.getvalue()
    with pytest.raises(CommandError, match="team: No team named 'nobody'"):
        call_command("set_budget", "nobody", "5")
    with pytest.raises(CommandError, match="amount"):
        call_command("set_budget", "vision", "-5")
    Team.objects.create(name="nlp")
    set_budget("nlp", Decimal("70"), cluster="prod", namespace="text")
    _hours(cluster, MONDAY, 3)
    api = APIClient()
    api.force_authenticate(lead)
    (row,) = api.get("/api/v1/budgets/").json()  # a lead sees the team's budgets only
    assert (row["team"], row["period"], Decimal(str(row["amount"])), row["thresholds"]) == (
        "vision", "weekly", Decimal(500), [50, 100])
    # The overview's bulk read (a fixed number of queries) says what each budget's own read says.
    from django.utils import timezone

    from apps.budgets.models import Budget
    from apps.budgets.selectors import budget_status, budget_statuses

    for now in (timezone.now(), MONDAY + timedelta(hours=2, minutes=30)):
        ordered = Budget.objects.order_by("team", "period", "cluster", "namespace")
        assert budget_statuses(now=now) == [budget_status(b, now) for b in ordered]
    assert [s.actual for s in budget_statuses(now=MONDAY + timedelta(hours=2, minutes=30))] == [
        Decimal(0), Decimal("30.000000")]  # nlp in prod/text spent nothing; vision 3 hours x 10.00
    finance = User.objects.create_user("fin")
    finance.groups.add(Group.objects.create(name="finance"))
    api.force_authenticate(finance)
    assert sorted(r["team"] for r in api.get("/api/v1/budgets/").json()) == ["nlp", "vision"]
    page = APIClient()
    page.force_login(finance)
    html = page.get("/budgets/").content.decode()
    assert "cluster prod" in html and "namespace text" in html and "$500.00" in html
    # Each team's status on its overview: the team filter narrows the budgets block to the team's.
    overview = page.get("/", {"team": "vision", "days": "7"}).content.decode()
    assert "1 budget this period" in overview and "$500.00" in overview and "prod text" not in overview
