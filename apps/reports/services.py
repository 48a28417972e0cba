"""Sending the finance reports: periods, editions, restatements, deliveries (docs/reports.md).

`send_reports` is what the beat runs every hour (weekly and monthly checks) and `manage.py send_reports` runs by
hand. For the last complete week and month (or `--period`):

* a period that is **final** (every hour of it, for every cluster that existed in it, final and OK) gets its
  `final` edition per scope, made once and e-mailed once to every subscription of that cadence whose scope it
  is; if the ledger of a final period changes later (a re-collect, a price recompute) and the figures differ,
  a `restated` edition with the per-team differences goes to the same recipients;
* a period that is not final is not sent, unless forced: then a `provisional` edition (its own version, with
  the coverage printed) is sent, and the final edition still follows once the period is final.

Final periods of the last `GPUFINOPS_REPORT_RESTATE_DAYS` days are checked for restatements on every run (a
cheap stamp of the period's buckets first; figures are recomputed only when it changed).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import defaultdict
from collections.abc import Set
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import make_msgid
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.db.models import Q as Query
from django.utils import timezone

from apps.reports import emails
from apps.reports.content import Content, Scope, build_content, restatement, scope_from
from apps.reports.models import ReportDelivery, ReportEdition, ReportSubscription
from apps.reports.periods import KINDS, Period, PeriodState, last_complete, ledger_stamp, parse_period, period_state
from apps.reports.subscriptions import resolve_scope

log = logging.getLogger(__name__)
# A delivery stuck in "sending" this long belonged to a sender that died: it may be claimed again.
STALE_SENDING = timedelta(hours=1)
FINALS = (ReportEdition.Status.FINAL, ReportEdition.Status.RESTATED)
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


@dataclass
class PeriodOutcome:
    period: Period
    final: bool
    coverage: float | None
    waiting: str | None = None
    editions: list[str] = field(default_factory=list)  # editions made in this run
    sent: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # "address: why"


@dataclass
class SendOutcome:
    periods: list[PeriodOutcome] = field(default_factory=list)
    restated: list[PeriodOutcome] = field(default_factory=list)

    @property
    def failed(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for p in [*self.periods, *self.restated]:
            out.update({f"{p.period.label} {k}": v for k, v in p.failed.items()})
        return out

    @property
    def sent(self) -> list[str]:
        return [f"{p.period.label} {s}" for p in [*self.periods, *self.restated] for s in p.sent]

    def as_dict(self) -> dict:
        def one(p: PeriodOutcome) -> dict:
            return {"period": p.period.label, "final": p.final, "coverage": p.coverage, "waiting": p.waiting,
                    "editions": p.editions, "sent": p.sent, "failed": p.failed, "skipped": p.skipped}

        return {"periods": [one(p) for p in self.periods], "restated": [one(p) for p in self.restated]}


# ---- Editions ----


def file_stem(period: Period, status: str, version: int, scope_key: str) -> str:
    """`gpufinops-2026-W47-final-all`, `gpufinops-2026-W47-provisional-v1-team-vision`, `...-restated-v3-all`."""
    edition = status if status == ReportEdition.Status.FINAL else f"{status}-v{version}"
    return _UNSAFE.sub("_", f"gpufinops-{period.label}-{edition}-{scope_key}")


def _latest(period: Period, scope: Scope, statuses=None) -> ReportEdition | None:
    qs = ReportEdition.objects.filter(kind=period.kind, period=period.label, scope=scope.key)
    if statuses:
        qs = qs.filter(status__in=statuses)
    return qs.order_by("-version").first()


def create_edition(period: Period, scope: Scope, content: Content, status: str, *, previous: ReportEdition | None,
                   stamp: str) -> ReportEdition:
    """Store a new edition (the next version for the period and scope). Two senders racing make one: the loser
    finds the winner's edition with the same figures."""
    for _ in range(3):
        latest = _latest(period, scope)
        if latest is not None and latest.status == status and latest.content_sha256 == content.content_sha256:
            return latest
        version = (latest.version if latest else 0) + 1
        figures = dict(content.figures)
        figures.update({"status": status, "version": version,
                        "previous_version": previous.version if previous else None})
        if status == ReportEdition.Status.RESTATED and previous is not None:
            figures["restatement"] = {"previous_version": previous.version, "previous_status": previous.status,
                                      "previous_made": previous.created_at.isoformat(),
                                      **restatement(previous.figures, content.figures)}
        stem = file_stem(period, status, version, scope.key)
        try:
            with transaction.atomic():
                return ReportEdition.objects.create(
                    kind=period.kind, period=period.label, period_start=period.start, period_end=period.end,
                    scope=scope.key, scope_teams=None if scope.teams is None else sorted(scope.teams),
                    version=version, status=status, previous=previous, figures=figures,
                    content_sha256=content.content_sha256,
                    csv_name=f"{stem}.csv", csv_bytes=content.csv, csv_sha256=hashlib.sha256(content.csv).hexdigest(),
                    focus_name=f"{stem}-focus.csv", focus_bytes=content.focus,
                    focus_sha256=hashlib.sha256(content.focus).hexdigest(),
                    ledger_stamp=stamp, checked_stamp=stamp,
                )
        except IntegrityError:
            continue  # another sender took this version: look again
    raise RuntimeError(f"could not store an edition of {period.label} {scope.key}")


def current_edition(period: Period, scope: Scope, state: PeriodState, *, now: datetime, stamp: str,
                    made: list[str]) -> ReportEdition:
    """The edition to send now: the final (or latest restated) one when the period is final, made or restated as
    needed; otherwise (forced) a provisional one, new only when its figures changed."""
    if state.final:
        latest_final = _latest(period, scope, FINALS)
        if latest_final is not None and stamp in (latest_final.checked_stamp, latest_final.ledger_stamp):
            return latest_final
        content = build_content(period, scope, now=now)
        if latest_final is not None and latest_final.content_sha256 == content.content_sha256:
            ReportEdition.objects.filter(pk=latest_final.pk).update(checked_stamp=stamp)
            return latest_final
        status = ReportEdition.Status.RESTATED if latest_final else ReportEdition.Status.FINAL
        edition = create_edition(period, scope, content, status, previous=latest_final, stamp=stamp)
    else:
        content = build_content(period, scope, now=now)
        latest = _latest(period, scope)
        if (latest is not None and latest.status == ReportEdition.Status.PROVISIONAL
                and latest.content_sha256 == content.content_sha256):
            return latest
        edition = create_edition(period, scope, content, ReportEdition.Status.PROVISIONAL, previous=latest,
                                 stamp=stamp)
    made.append(str(edition))
    return edition


# ---- Deliveries ----


def _claim(sub: ReportSubscription, edition: ReportEdition, now: datetime) -> ReportDelivery | None:
    """The delivery to send, or None when it was sent or another sender is on it (the unique row is the lock)."""
    delivery, created = ReportDelivery.objects.get_or_create(subscription=sub, edition=edition)
    if created:
        return delivery
    retry = Query(status=ReportDelivery.Status.FAILED) | Query(
        status=ReportDelivery.Status.SENDING, created_at__lt=now - STALE_SENDING
    )
    claimed = ReportDelivery.objects.filter(retry, pk=delivery.pk).update(
        status=ReportDelivery.Status.SENDING, created_at=now)
    return delivery if claimed else None


def _domain() -> str:
    address = settings.DEFAULT_FROM_EMAIL
    return address.rsplit("@", 1)[-1].strip("> ") if "@" in address else "localhost"


def deliver(sub: ReportSubscription, edition: ReportEdition, *, now: datetime, outcome: PeriodOutcome) -> None:
    """E-mail `edition` to `sub` unless it already has it; a failure is recorded and retried on the next run."""
    if sub.user is None:  # resolve_scope never sends to one: without a person there is no address
        outcome.skipped.append(f"{sub.email}: the subscription belongs to no person")
        return
    recipient = sub.user.email
    delivery = _claim(sub, edition, now)
    if delivery is None:
        outcome.skipped.append(f"{recipient}: already sent {edition.status} v{edition.version}")
        return
    rendered = emails.render(edition, sub)
    message_id = make_msgid(domain=_domain())
    try:
        msg = emails.message(edition, sub, recipient, rendered)
        msg.extra_headers["Message-ID"] = message_id
        msg.send()
    except Exception as exc:  # SMTP down, bad address: recorded and retried on the next run
        ReportDelivery.objects.filter(pk=delivery.pk).update(
            status=ReportDelivery.Status.FAILED, error=str(exc)[:2000], recipient=recipient)
        outcome.failed[recipient] = str(exc)
        log.warning("report %s to %s failed: %s", edition, recipient, exc)
        return
    ReportDelivery.objects.filter(pk=delivery.pk).update(
        status=ReportDelivery.Status.SENT, sent_at=timezone.now(), error="", recipient=recipient,
        message_id=message_id, subject=rendered.subject, text_body=rendered.text, html_body=rendered.html,
    )
    outcome.sent.append(f"{recipient} ({edition.status} v{edition.version})")


# ---- The runs ----


def send_period(period: Period, *, now: datetime, force: bool = False) -> PeriodOutcome:
    """Send `period`'s current edition to every active subscription of its cadence that has not had it."""
    state = period_state(period, now)
    outcome = PeriodOutcome(period, state.final, state.ratio)
    if not state.final:
        outcome.waiting = state.reason()
        if not force:
            log.info("report %s not sent yet: %s", period.label, outcome.waiting)
            return outcome
    stamp = ledger_stamp(period)
    editions: dict[str, ReportEdition] = {}
    subs = ReportSubscription.objects.filter(active=True, cadence=period.kind).select_related("user")
    for sub in subs.order_by("pk"):
        scope, why = resolve_scope(sub)
        if scope is None:
            outcome.skipped.append(f"{sub.email}: {why}")
            continue
        try:
            if scope.key not in editions:
                editions[scope.key] = current_edition(period, scope, state, now=now, stamp=stamp,
                                                      made=outcome.editions)
        except Exception as exc:  # a report that cannot be built is this run's failure, not the next scope's
            log.exception("report %s for %s could not be built", period.label, scope.key)
            outcome.failed[sub.email] = f"{type(exc).__name__}: {exc}"
            continue
        deliver(sub, editions[scope.key], now=now, outcome=outcome)
    return outcome


def restate_closed(*, now: datetime, kinds=KINDS, exclude: Set[tuple[str, str]] = frozenset()) -> list[PeriodOutcome]:
    """Final periods of the last GPUFINOPS_REPORT_RESTATE_DAYS whose ledger changed: when their figures differ,
    a restated edition goes to the subscriptions that got an edition of that period and scope before."""
    since = now - timedelta(days=settings.GPUFINOPS_REPORT_RESTATE_DAYS)
    latest = (
        ReportEdition.objects.filter(kind__in=kinds, status__in=FINALS, period_end__gte=since)
        .values("kind", "period", "scope").annotate(version=Max("version"))
    )
    by_period: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in latest:
        if (row["kind"], row["period"]) not in exclude:
            by_period[(row["kind"], row["period"])].append(row)
    outcomes = []
    for (kind, label), rows in sorted(by_period.items()):
        period = parse_period(label)
        stamp = ledger_stamp(period)
        editions = [e for e in (ReportEdition.objects.get(kind=kind, period=label, scope=r["scope"],
                                                          version=r["version"]) for r in rows)
                    if stamp not in (e.checked_stamp, e.ledger_stamp)]
        if not editions:
            continue
        state = period_state(period, now)
        if not state.final:
            continue  # being re-collected: look again once it is final
        outcome = PeriodOutcome(period, True, state.ratio)
        for previous in editions:
            scope = scope_from(previous.scope_teams)
            content = build_content(period, scope, now=now)
            if content.content_sha256 == previous.content_sha256:
                ReportEdition.objects.filter(pk=previous.pk).update(checked_stamp=stamp)
                continue
            edition = create_edition(period, scope, content, ReportEdition.Status.RESTATED, previous=previous,
                                     stamp=stamp)
            outcome.editions.append(str(edition))
            earlier = ReportDelivery.objects.filter(
                edition__kind=kind, edition__period=label, edition__scope=scope.key,
                status=ReportDelivery.Status.SENT).values("subscription_id")
            for sub in ReportSubscription.objects.filter(pk__in=earlier, active=True).select_related("user"):
                current, why = resolve_scope(sub)
                if current is None or current.key != scope.key:
                    outcome.skipped.append(f"{sub.email}: {why or 'no longer this scope'}")
                    continue
                deliver(sub, edition, now=now, outcome=outcome)
        if outcome.editions:
            outcomes.append(outcome)
    return outcomes


def send_reports(*, now: datetime | None = None, period: Period | None = None, kinds=KINDS,
                 force: bool = False) -> SendOutcome:
    """The beat's check and `manage.py send_reports`: the due periods (or `period`), then restatements."""
    now = now or timezone.now()
    targets = [period] if period is not None else [last_complete(kind, now) for kind in kinds]
    outcome = SendOutcome()
    for p in targets:
        outcome.periods.append(send_period(p, now=now, force=force))
    if period is None:
        outcome.restated = restate_closed(now=now, kinds=kinds, exclude={(p.kind, p.label) for p in targets})
    return outcome
