"""Telling the owners (docs/findings.md, "Notifications").

Which findings: idle allocations and idle-held pods once idle GPUFINOPS_NOTIFY_IDLE_HOURS hours, stragglers once
listed, unhealthy GPUs a team held; only findings whose last hour is within GPUFINOPS_NOTIFY_RECENT_HOURS (a
backfill does not mail history). Who: the finding's team, by e-mail to each member with an address who has not
opted out (for that team or every team), and by each of the team's enabled webhook channels (`TeamChannel`).

Each (finding, channel, recipient) is one `Notification` row, created once (a unique key: re-collecting never
repeats one) and sent by `send_notifications` (the Celery task's and `manage.py notify_findings`' service).
At most GPUFINOPS_NOTIFY_MAX_PER_HOUR messages go to one recipient for one team per hour: past that, the rest
go as one summary message. A failed send is retried with backoff (1, 2, 4 ... minutes, at most an hour) up to
GPUFINOPS_NOTIFY_MAX_ATTEMPTS attempts, then recorded failed.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone

from apps.common.outbound import post_json
from apps.common.redaction import scrub
from apps.inventory.models import Team

from .constants import Kind
from .models import Finding, Notification, NotificationOptOut, TeamChannel
from .selectors import min_hours

log = logging.getLogger(__name__)

SALT = "gpufinops.findings.opt-out"
CENT = Decimal("0.01")
LABELS: dict[str, str] = {
    Kind.IDLE_ALLOCATION: "Idle allocation", Kind.IDLE_HELD: "Idle GPU holding memory",
    Kind.STRAGGLER: "Straggler", Kind.UNHEALTHY_GPU: "Unhealthy GPU",
}


def notified_q() -> Q:
    """Findings worth telling their team about (see the module docstring)."""
    idle_hours = max(settings.GPUFINOPS_NOTIFY_IDLE_HOURS, min_hours(Kind.IDLE_ALLOCATION))
    return (
        Q(kind__in=[Kind.IDLE_ALLOCATION, Kind.IDLE_HELD], hours__gte=idle_hours)
        | Q(kind=Kind.STRAGGLER, hours__gte=min_hours(Kind.STRAGGLER))
        | Q(kind=Kind.UNHEALTHY_GPU)
    ) & ~Q(team="")


# ---- Opt-out links ----


def opt_out_token(user_id: int, team: str | None) -> str:
    return signing.dumps({"u": user_id, "t": team}, salt=SALT, compress=False)


def read_opt_out_token(token: str) -> tuple[int, str | None] | None:
    try:
        data = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("u"), int):
        return None
    team = data.get("t")
    return data["u"], team if isinstance(team, str) else None


def opt_out_url(user_id: int, team: str | None) -> str:
    return f"{settings.GPUFINOPS_BASE_URL.rstrip('/')}/findings/opt-out/{opt_out_token(user_id, team)}/"


def opt_out(user, team: Team | None) -> NotificationOptOut:
    """`user` gets no more finding e-mails for `team` (every team when None)."""
    row, _ = NotificationOptOut.objects.get_or_create(user=user, team=team)
    return row


def opt_in(user, team: Team | None) -> int:
    return NotificationOptOut.objects.filter(user=user, team=team).delete()[0]


# ---- Planning: who is told what ----


def recipients(team: Team) -> list:
    """Members of `team` with an e-mail address who did not opt out (of this team or of every team)."""
    opted = set(NotificationOptOut.objects.filter(Q(team__isnull=True) | Q(team=team)).values_list("user_id",
                                                                                                  flat=True))
    return [u for u in team.members.filter(is_active=True).exclude(email="").order_by("pk") if u.pk not in opted]


def plan(now: datetime) -> int:
    """Record a pending notification for every (finding, recipient) not told yet. Returns how many are new."""
    recent = now - timedelta(hours=settings.GPUFINOPS_NOTIFY_RECENT_HOURS)
    findings = Finding.objects.filter(notified_q(), last_hour__gte=recent).select_related("cluster")
    by_team: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_team[f.team].append(f)
    rows = []
    for name, team_findings in sorted(by_team.items()):
        team = Team.objects.filter(name=name).first()
        if team is None:
            continue
        people = recipients(team)
        channels = list(TeamChannel.objects.filter(team=team, enabled=True))
        for f in team_findings:
            rows += [Notification(finding=f, team=name, channel=Notification.Channel.EMAIL, recipient=u.email[:320],
                                  user=u, created_at=now) for u in people]
            rows += [Notification(finding=f, team=name, channel=Notification.Channel.WEBHOOK, recipient=str(c.pk),
                                  team_channel=c, created_at=now) for c in channels]
    if not rows:
        return 0
    before = Notification.objects.count()
    Notification.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
    return Notification.objects.count() - before


# ---- Sending ----


@dataclass
class SendReport:
    planned: int = 0
    sent: int = 0  # messages (a summary counts once)
    summarized: int = 0  # notifications told within a summary
    failed: int = 0  # sends that failed this time (retried later unless out of attempts)
    given_up: int = 0
    deferred: int = 0  # over the rate limit with no message left this hour
    errors: list[str] = field(default_factory=list)


def _backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(60 * 2 ** max(attempts - 1, 0), 3600))


def finding_url(f: Finding) -> str:
    base = settings.GPUFINOPS_BASE_URL.rstrip("/")
    return f"{base}/findings/?kind={f.kind}&cluster={f.cluster.name}&days=7#finding-{f.pk}"


def describe(f: Finding) -> dict[str, Any]:
    """What a message says about one finding (templates/findings/email-*.txt/html, the webhook JSON)."""
    gpus = f.detail.get("gpus")
    phrases: dict[str, str] = {
        Kind.IDLE_ALLOCATION: f"{f.namespace}/{f.pod} holds {gpus or '?'} GPU(s) doing nothing for {f.hours} h",
        Kind.IDLE_HELD: f"{f.namespace}/{f.pod} holds {gpus or '?'} GPU(s) and their memory, computing nothing, "
                        f"for {f.hours} h",
        Kind.STRAGGLER: f"{f.workload} ({f.namespace}) runs at the pace of its slowest GPU ({f.pod}, "
                        f"{f.gpu_uuid}: {f.detail.get('slowest', 0):.0%} vs median {f.detail.get('median', 0):.0%})"
                        f" for {f.hours} h",
        Kind.UNHEALTHY_GPU: f"GPU {f.gpu_uuid} on {f.node}, held by {f.namespace}/{f.pod}, is unhealthy "
                            f"({f.detail.get('reason', '')}) for {f.hours} h",
    }
    what = phrases[f.kind]
    return {
        "id": f.pk, "kind": f.kind, "label": LABELS[f.kind], "what": what, "cluster": f.cluster.name,
        "team": f.team, "namespace": f.namespace, "workload": f.workload, "pod": f.pod, "node": f.node,
        "gpu_uuid": f.gpu_uuid, "start": f.start.isoformat(), "end": f.end.isoformat() if f.end else None,
        "hours": f.hours, "gpu_hours": round(float(f.gpu_hours), 3), "cost": str(f.cost.quantize(CENT)),
        "infra_loss_gpu_hours": round(float(f.allocated_gpu_hours), 3) if f.kind == Kind.UNHEALTHY_GPU else None,
        "url": finding_url(f), "detail": f.detail,
    }


def _email(items: list[Notification], connection) -> None:
    user = items[0].user
    team = items[0].team
    described = [describe(n.finding) for n in items]
    ctx = {"findings": described, "team": team, "summary": len(items) > 1,
           "opt_out_team": opt_out_url(user.pk, team) if user else None,
           "opt_out_all": opt_out_url(user.pk, None) if user else None,
           "findings_url": f"{settings.GPUFINOPS_BASE_URL.rstrip('/')}/findings/?team={team}&days=7"}
    subject = " ".join(render_to_string("findings/email-subject.txt", ctx).split())
    headers = {}
    if ctx["opt_out_team"]:
        headers = {"List-Unsubscribe": f"<{ctx['opt_out_team']}>",
                   "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
    msg = EmailMultiAlternatives(subject, render_to_string("findings/email-body.txt", ctx),
                                 settings.DEFAULT_FROM_EMAIL, [items[0].recipient], headers=headers,
                                 connection=connection)
    msg.attach_alternative(render_to_string("findings/email-body.html", ctx), "text/html")
    msg.send()


class WebhookError(Exception):
    """A webhook send failed; the message holds no part of the URL beyond scheme://host:port."""


def _webhook(items: list[Notification]) -> None:
    described = [describe(n.finding) for n in items]
    if len(items) == 1:
        d = described[0]
        text = f"[gpufinops] {d['label']} ({d['team']}, {d['cluster']}): {d['what']}. {d['url']}"
    else:
        text = (f"[gpufinops] {len(items)} findings for team {items[0].team}: "
                + "; ".join(f"{d['label']}: {d['what']}" for d in described[:20]))
    payload = {"text": text, "team": items[0].team, "findings": described}
    channel = items[0].team_channel
    if channel is None:  # deleting a channel deletes its notifications (CASCADE): only a broken row gets here
        raise RuntimeError("the notification's team channel is gone")
    url = channel.url
    try:
        response = post_json(url, json.dumps(payload, default=str))
    except Exception as exc:  # requests quotes the URL (a credential) in its messages: scrubbed, not chained
        raise WebhookError(f"{type(exc).__name__}: {scrub(str(exc), url)}") from None
    if response.is_redirect:
        raise WebhookError(f"webhook answered HTTP {response.status_code} (a redirect, not followed)")
    if response.status_code >= 300:
        raise WebhookError(f"webhook answered HTTP {response.status_code}")


def send_notifications(now: datetime | None = None) -> SendReport:
    """Plan what is new, then send what is due, within the rate limit; record every send."""
    now = now or timezone.now()
    report = SendReport(planned=plan(now))
    due = (Notification.objects.filter(status=Notification.Status.PENDING)
           .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
           .select_related("finding", "finding__cluster", "user", "team_channel")
           .order_by("team", "channel", "recipient", "finding__start", "finding_id"))
    groups: dict[tuple[str, str, str], list[Notification]] = defaultdict(list)
    for n in due:
        groups[(n.team, n.channel, n.recipient)].append(n)
    connection = get_connection() if any(k[1] == Notification.Channel.EMAIL for k in groups) else None
    window = now - timedelta(hours=1)
    for (team, channel, recipient), items in sorted(groups.items()):
        sent_lately = (Notification.objects.filter(team=team, channel=channel, recipient=recipient, sent_at__gte=window)
                       .values("message").distinct().count())
        budget = settings.GPUFINOPS_NOTIFY_MAX_PER_HOUR - sent_lately
        if budget <= 0:
            report.deferred += len(items)
            continue
        messages = [[n] for n in items]
        if len(items) > budget:  # the last message tells the rest at once
            messages = [[n] for n in items[: budget - 1]] + [items[budget - 1:]]
        for batch in messages:
            try:
                if channel == Notification.Channel.EMAIL:
                    _email(batch, connection)
                else:
                    _webhook(batch)
            except Exception as exc:  # SMTP, HTTP, DNS...: recorded, retried with backoff
                said = f"{type(exc).__name__}: {scrub(str(exc))}"  # any URL in it cut to scheme://host:port
                report.failed += len(batch)
                report.errors.append(f"{channel} {recipient}: {said}"[:300])
                log.warning("finding notification to %s %s failed: %s", channel, recipient, said)
                for n in batch:
                    n.attempts += 1
                    n.last_error = said[:2000]
                    if n.attempts >= settings.GPUFINOPS_NOTIFY_MAX_ATTEMPTS:
                        n.status, n.next_attempt_at = Notification.Status.FAILED, None
                        report.given_up += 1
                    else:
                        n.next_attempt_at = now + _backoff(n.attempts)
                    n.save(update_fields=["attempts", "last_error", "status", "next_attempt_at"])
                continue
            status = Notification.Status.SENT if len(batch) == 1 else Notification.Status.DIGEST
            report.sent += 1
            report.summarized += len(batch) if len(batch) > 1 else 0
            Notification.objects.filter(pk__in=[n.pk for n in batch]).update(
                status=status, sent_at=now, message=uuid.uuid4().hex, attempts=batch[0].attempts + 1, last_error="",
                next_attempt_at=None)
    return report
