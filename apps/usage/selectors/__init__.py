"""Reads of the GPU-hour ledger for the API, the reports and the dashboard (ledger.md defines every number).

One module per kind of read, every public name importable from here:

* `report`: the usage report (`/api/v1/usage/`): GPU-hours and cost grouped and filtered, with the fleet's
  capacity; figures typed by `apps.usage.figures`;
* `capacity`: capacity totals and rows, and whether a range is still provisional;
* `status`: buckets due for collection, data status per cluster and day, clusters missing a signal, freshness;
* `workloads`: one workload's pods, the workloads of pods, and the traits of a page of workloads;
* `rollups`: which rollup answers a range, the filters, how group values print;
* `ranking`: workloads, pods or namespaces ordered by any figure over any period, paged in the database.

Idle allocations are findings: ``apps.findings.selectors.idle_allocation_list``.

Access control is one argument, ``visible_teams``: the set from
``apps.accounts.selectors.visible_team_names`` (None means every team). Every read filters by it.
"""

from apps.usage.figures import CAPACITY_FIELDS, DECIMALS, MONEY_FIELDS, USAGE_FIELDS, busy_share, coverage
from apps.usage.selectors.capacity import (
    CAPACITY_GROUP_KEYS,
    capacity_and_provisional,
    capacity_rows,
    capacity_totals,
    has_provisional_buckets,
)
from apps.usage.selectors.ranking import (
    LEVELS,
    Ordering,
    RankedRow,
    Ranking,
    parse_ordering,
    rank,
    sort_keys,
)
from apps.usage.selectors.report import (
    GROUP_KEYS,
    IMPLIED_KEYS,
    TooLarge,
    UsageReport,
    compute_usage_report,
    expand_group_by,
    ledger_version,
    usage_report,
)
from apps.usage.selectors.rollups import FILTER_KEYS, Filters, is_whole_day_range, make_filters
from apps.usage.selectors.status import (
    BUCKET_STATES,
    DayStatus,
    MissingSignal,
    clusters_missing_signal,
    data_as_of,
    data_status,
    due_hours,
    final_share,
    final_shares,
)
from apps.usage.selectors.workloads import (
    PodUsage,
    Seen,
    Traits,
    pod_workloads,
    workload_pods,
    workload_seen,
    workload_traits,
)

__all__ = [
    "BUCKET_STATES", "CAPACITY_FIELDS", "CAPACITY_GROUP_KEYS", "DECIMALS", "FILTER_KEYS", "GROUP_KEYS",
    "IMPLIED_KEYS", "LEVELS", "MONEY_FIELDS", "Ordering", "RankedRow", "Ranking", "parse_ordering", "rank",
    "sort_keys", "USAGE_FIELDS", "DayStatus", "Filters", "MissingSignal",
    "PodUsage", "Seen", "TooLarge", "UsageReport", "busy_share", "capacity_and_provisional", "capacity_rows",
    "capacity_totals", "clusters_missing_signal", "compute_usage_report", "coverage", "data_as_of", "data_status",
    "due_hours", "expand_group_by", "final_share", "final_shares", "has_provisional_buckets", "is_whole_day_range",
    "ledger_version", "make_filters", "pod_workloads", "usage_report",
    "workload_pods", "workload_seen", "Traits", "workload_traits",
]
