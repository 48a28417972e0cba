"""`manage.py set_budget TEAM AMOUNT [--period weekly|monthly] [--cluster C] [--namespace NS] [--thresholds 80,100]
[--inactive]`: create or change a team's budget (docs/budgets.md)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.budgets.services import set_budget


class Command(BaseCommand):
    help = "Create or change a team's weekly or monthly budget in USD, with alert thresholds in percent."

    def add_arguments(self, parser):
        parser.add_argument("team")
        parser.add_argument("amount", help="USD per period")
        parser.add_argument("--period", choices=["weekly", "monthly"], default="monthly")
        parser.add_argument("--cluster", default="", help="only this cluster's spend")
        parser.add_argument("--namespace", default="", help="only this namespace's spend")
        parser.add_argument("--thresholds", default="80,100", help="percentages, comma-separated")
        parser.add_argument("--inactive", action="store_true", help="keep the budget but check it no more")

    def handle(self, *args, **opts):
        try:
            amount = Decimal(opts["amount"])
            thresholds = [int(t) for t in opts["thresholds"].split(",") if t.strip()]
        except (InvalidOperation, ValueError) as exc:
            raise CommandError("AMOUNT is a number of USD and --thresholds whole percentages, e.g. 80,100") from exc
        try:
            budget = set_budget(opts["team"], amount, period=opts["period"], cluster=opts["cluster"],
                                namespace=opts["namespace"], thresholds=thresholds, active=not opts["inactive"])
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from exc
        self.stdout.write(f"budget {budget}: thresholds {', '.join(f'{t} %' for t in budget.thresholds)}"
                          f"{'' if budget.active else ' (inactive)'}")
