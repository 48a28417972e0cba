"""Telling the owners, end to end: findings collected from a real Prometheus backfilled with the simulated demo
cluster, told by e-mail through a real SMTP server and by a local webhook receiver. One notification per new
finding and recipient; none repeated when hours are collected again; a person who opted out gets nothing."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from apps.findings.models import Finding, Notification, TeamChannel
from apps.findings.notifications import notified_q, send_notifications
from apps.ingest.services import collect_cluster
from apps.inventory.models import Team
from tests.ingest.conftest import make_cluster, sim_world  # noqa: F401 (the session's simulated world)

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def _member(username: str, team: str, email: str) -> User:
    user = User.objects.create_user(username, email=email, password="x")
    Team.objects.get_or_create(name=team)[0].members.add(user)
    return user


def test_one_notification_per_new_finding_none_repeated_opt_out_honoured(sim_world, smtp_settings, webhook,  # noqa: F811
                                                                         settings):
    settings.GPUFINOPS_NOTIFY_MAX_PER_HOUR = 1000  # the rate limit has its own test
    cluster = make_cluster(sim_world)
    report = collect_cluster(cluster, sim_world.hours, now=sim_world.end)
    assert report.ok and not report.findings_failed
    _member("ada", "research", "ada@example.com")
    _member("ben", "research", "ben@example.com")
    _member("sam", "serving", "sam@example.com")
    call_command("findings_opt_out", "ben", "--team", "research")
    call_command("team_channel", "add", "research", "chat", "--url", webhook.url)

    told = Finding.objects.filter(notified_q(), cluster=cluster)
    research = {f.pk for f in told if f.team == "research"}
    serving = {f.pk for f in told if f.team == "serving"}
    kinds = Counter(f.kind for f in told if f.team == "research")
    assert research and serving and {"unhealthy_gpu", "straggler"} <= set(kinds), kinds

    result = send_notifications(now=sim_world.end)
    assert result.failed == 0
    inbox = Counter(m.rcpt_tos[0] for m in smtp_settings.messages)
    assert inbox == {"ada@example.com": len(research), "sam@example.com": len(serving)}  # ben opted out
    assert sorted(f["id"] for body in webhook.received for f in body["findings"]) == sorted(research)
    assert all(len(body["findings"]) == 1 and body["text"].startswith("[gpufinops]") for body in webhook.received)
    message = next(m for m in smtp_settings.messages if m.rcpt_tos == ["ada@example.com"])
    assert "List-Unsubscribe" in message.message and "/findings/opt-out/" in message.message["List-Unsubscribe"]
    assert Notification.objects.filter(status="sent").count() == len(research) * 2 + len(serving)

    # Collecting hours again (the newest included) and running again tells nobody anything twice.
    collect_cluster(cluster, [sim_world.hours[-1], sim_world.hours[-2], sim_world.hours[5]], now=sim_world.end)
    again = send_notifications(now=sim_world.end + timedelta(minutes=5))
    assert (again.planned, again.sent) == (0, 0)
    assert len(smtp_settings.messages) == len(research) + len(serving)
    assert len(webhook.received) == len(research)
    assert TeamChannel.objects.get(name="chat").url == webhook.url
