"""`manage.py import_bill FILE [FILE ...]`: import FOCUS 1.0-1.3 bill files (CSV, .csv.gz or Parquet), each whole
or not at all (docs/billing.md). The same file twice changes nothing."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.billing.focusfile import BillFileError
from apps.billing.services import import_bill


class Command(BaseCommand):
    help = "Import FOCUS bill files: keep the GPU nodes' charges, match them to nodes, spread them over node-hours."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", help="FOCUS CSV, gzipped CSV or Parquet files")

    def handle(self, *args, **opts):
        failed = []
        for name in opts["files"]:
            path = Path(name)
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise CommandError(f"{name}: {exc.strerror or exc}") from exc
            try:
                result = import_bill(data, path.name)
            except BillFileError as exc:
                self.stderr.write(f"{name}: refused, nothing imported: {exc}")
                failed.append(name)
                continue
            bill = result.bill
            if not result.created:
                self.stdout.write(f"{name}: imported before ({bill.imported_at:%Y-%m-%d %H:%M} UTC): nothing changed")
                continue
            self.stdout.write(
                f"{name}: FOCUS {bill.focus_version}, {bill.rows_read} rows read, {bill.lines_kept} GPU node lines "
                f"kept ({bill.lines_matched} matched to nodes), {bill.lines_replaced} earlier lines replaced"
            )
            for warning in bill.warnings:
                self.stdout.write(f"  {warning}")
        if failed:
            raise CommandError(f"{len(failed)} file(s) refused: {', '.join(failed)}")
