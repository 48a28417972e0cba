"""`manage.py check_budgets`: the twin of the beat's `check_budgets_task`: check every budget now, record the
thresholds crossed, send the alerts due."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from apps.budgets.services import check_budgets


class Command(BaseCommand):
    help = "Check every active budget and send its alerts (once per budget, period and threshold)."

    def handle(self, *args, **opts):
        report = check_budgets()
        self.stdout.write(f"{report.budgets} budgets checked, {report.planned} alerts recorded, {report.sent} sent, "
                          f"{report.failed} failed")
        for error in report.errors:
            self.stderr.write(f"  {error}")
