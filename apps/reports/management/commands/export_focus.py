"""`manage.py export_focus --start 2026-11-01 --end 2026-12-01 [--out FILE] [--granularity day|hour] [--version 1.3]`:
the FOCUS export of the whole fleet (the same rows as /api/v1/exports/focus/), written as CSV: 1.2 by default, 1.3
in the split-cost-allocation form (each node's capacity cost split into its pods and unallocated capacity)."""

from __future__ import annotations

import hashlib
import json
import sys

from django.core.management.base import BaseCommand, CommandError

from apps.common.commands import time_option
from apps.reports import focus


class Command(BaseCommand):
    help = "Write the FOCUS cost and usage rows of [start, end) to --out (default: stdout)."

    def create_parser(self, prog_name, subcommand, **kwargs):
        # `--version` is the FOCUS version here, not Django's (which only prints Django's own version).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--start", required=True, help="ISO 8601 date or time (UTC), inclusive")
        parser.add_argument("--end", required=True, help="ISO 8601 date or time (UTC), exclusive")
        parser.add_argument("--out", help="file to write (default: stdout)")
        parser.add_argument("--granularity", choices=focus.GRANULARITIES, default="day", help="charge period")
        parser.add_argument("--version", dest="focus_version", choices=focus.VERSIONS, default=focus.FOCUS_VERSION,
                            help="FOCUS version: 1.2 (default) or 1.3 (split cost allocation by node)")
        parser.add_argument("--metadata", help="also write the FOCUS metadata JSON to this file")

    def handle(self, *args, **opts):
        start, end = time_option("start", opts["start"]), time_option("end", opts["end"])
        if start is None or end is None:
            raise CommandError("--start and --end are required")
        if end <= start:
            raise CommandError("--end must be after --start")
        if any(t.minute or t.second or t.microsecond for t in (start, end)):
            raise CommandError("--start and --end must fall on whole hours (UTC)")
        if opts["granularity"] == "day" and (start.hour or end.hour):
            raise CommandError("daily charge periods need whole UTC days: use dates, or --granularity hour")
        digest = hashlib.sha256()
        rows = 0
        out = open(opts["out"], "wb") if opts["out"] else sys.stdout.buffer  # noqa: SIM115 (closed below)
        try:
            for chunk in focus.focus_csv_chunks(start=start, end=end, granularity=opts["granularity"],
                                                  version=opts["focus_version"]):
                out.write(chunk)
                digest.update(chunk)
                rows += chunk.count(b"\r\n")
        finally:
            if opts["out"]:
                out.close()
        if opts["metadata"]:
            with open(opts["metadata"], "w", encoding="utf-8") as fh:
                json.dump(focus.focus_metadata(version=opts["focus_version"]), fh, indent=2)
        if opts["out"]:
            self.stdout.write(f"{opts['out']}: {rows - 1} rows, SHA-256 {digest.hexdigest()}")
