"""bench/invariants: the ledger invariants of the spec checked on every bucket of a benchmark database.

    python bench/invariants.py [--db postgres://postgres@127.0.0.1:5432/gpufinops_bench] [--cluster NAME ...]

Run it after bench/api.py (a week of the `large` scenario, 10,000 GPUs, through the real write path) or
bench/collect.py (one bucket of `large` through the production collector): it prints the rows checked and, per
invariant, how many rows or groups break it (tests/invariants.py; the collection tests run the same checks on the
demo). Nothing is asserted: the exit status is 1 when any invariant is broken, so a script can tell.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgres://postgres@127.0.0.1:5432/gpufinops_bench")
    parser.add_argument("--cluster", nargs="*", default=None, help="cluster names (default: every cluster)")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.db
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufinops.settings")
    import django

    django.setup()
    from apps.inventory.models import Cluster
    from tests.invariants import ledger_size, ledger_violations

    clusters = Cluster.objects.all() if args.cluster is None else Cluster.objects.filter(name__in=args.cluster)
    ids = sorted(clusters.values_list("pk", flat=True))
    if not ids:
        print("no such cluster in this database", file=sys.stderr)
        return 2
    names = ", ".join(Cluster.objects.filter(pk__in=ids).order_by("name").values_list("name", flat=True))
    started = time.perf_counter()
    size = ledger_size(ids)
    violations = ledger_violations(ids)
    seconds = time.perf_counter() - started
    print(f"clusters: {names}")
    print("rows checked: " + ", ".join(f"{table} {n:,}" for table, n in size.items()))
    for name, broken in violations.items():
        print(f"  {'ok    ' if broken == 0 else 'BROKEN'} {name}: {broken:,} breaking")
    print(f"{sum(1 for v in violations.values() if v == 0)}/{len(violations)} invariants hold ({seconds:.1f} s)")
    return 0 if not any(violations.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
