"""`manage.py send_reports [--period 2026-W47|2026-11] [--force] [--kind weekly|monthly] [--now ISO]`: the beat's
twin (interfaces.md). Exits non-zero when a send failed (retried on the next run)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.common.commands import time_option
from apps.reports.periods import KINDS, parse_period
from apps.reports.services import send_reports


class Command(BaseCommand):
    help = ("Send every due report (weekly: the last ISO week; monthly: the last calendar month) once its hours are "
            "final, and restatements of final periods whose figures changed. --force sends a provisional edition "
            "of a period that is not final yet; the final edition still follows.")

    def add_arguments(self, parser):
        parser.add_argument("--period", help="one period: an ISO week (2026-W47) or a month (2026-11)")
        parser.add_argument("--force", action="store_true",
                            help="send a provisional edition when the period is not final yet")
        parser.add_argument("--kind", choices=KINDS, help="only weekly or only monthly subscriptions")
        parser.add_argument("--now", help="ISO 8601 time (UTC unless it has an offset) to act as (default: now)")

    def handle(self, *args, **opts):
        now = time_option("now", opts["now"])
        period = None
        if opts["period"]:
            try:
                period = parse_period(opts["period"])
            except ValueError as exc:
                raise CommandError(f"--period: {exc}") from exc
        kinds = (opts["kind"],) if opts["kind"] else KINDS
        outcome = send_reports(now=now, period=period, kinds=kinds, force=opts["force"])
        for p in [*outcome.periods, *outcome.restated]:
            head = f"{p.period.label} ({p.period.start:%Y-%m-%d} .. {p.period.end:%Y-%m-%d})"
            coverage = "n/a" if p.coverage is None else f"{p.coverage:.1%}"
            if p.waiting and not (p.sent or p.editions or p.failed):
                self.stdout.write(f"{head}: not final yet, coverage {coverage} ({p.waiting}); nothing sent "
                                  "(--force sends a provisional edition)")
                continue
            state = "final" if p.final else f"provisional, coverage {coverage}"
            self.stdout.write(f"{head}: {state}; {len(p.editions)} new edition(s), {len(p.sent)} sent, "
                              f"{len(p.skipped)} skipped")
            for line in [*p.editions, *p.sent, *p.skipped]:
                self.stdout.write(f"  {line}")
        if outcome.failed:
            failures = "; ".join(f"{k}: {v}" for k, v in outcome.failed.items())
            raise CommandError(f"{len(outcome.failed)} failed (retried on the next run): {failures}")
