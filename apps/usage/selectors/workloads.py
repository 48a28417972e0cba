"""Reads of one workload's pods (PodHour, by the ledger's workload index) and of the workloads pods belong to."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Count, Max, Min, Sum

from apps.common.inlists import in_batches
from apps.usage import money
from apps.usage.activity import default_signal
from apps.usage.figures import UsageFigures, round_hours
from apps.usage.models import PodHour


@dataclass(frozen=True)
class PodUsage:
    """One pod of a workload over a range: where it ran, what it held (most GPUs in any hour, its request), its
    queue, its first and last hour, and its figures (at the output precision)."""

    team: str
    pod: str
    pod_uid: str
    node: str
    node_group: str
    gpu_model: str
    resources: str
    cluster_queue: str
    local_queue: str
    gpus: float
    first_hour: datetime
    last_hour: datetime
    hours: int
    figures: UsageFigures
    allocation_mode: str = "device_plugin"  # how its GPUs were handed out (gpus.AllocationMode)


def workload_pods(
    *, start: datetime, end: datetime, visible_teams: set[str] | None, cluster: str, namespace: str,
    workload: str, signal: str | None = None,
) -> list[PodUsage]:
    """The pods of one workload in `[start, end)` under `signal`, in the order they started."""
    signal = signal or default_signal()
    qs = PodHour.objects.filter(cluster__name=cluster, namespace=namespace, workload=workload,
                                hour__gte=start, hour__lt=end)
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    rows = (
        qs.values("team", "pod", "pod_uid", "node", "node_group", "gpu_model", "resources", "cluster_queue",
                  "local_queue", "allocation_mode")
        .annotate(
            gpus=Max("gpus"), first_hour=Min("hour"), last_hour=Max("hour"), hours=Count("id"),
            _allocated=Sum("allocated_gpu_hours"), _working=Sum(f"working_{signal}"), _idle=Sum(f"idle_{signal}"),
            _unmeasured=Sum(f"unmeasured_{signal}"), _cost=Sum("cost"), _idle_cost=Sum(f"idle_cost_{signal}"),
            _unpriced=Sum("unpriced_gpu_hours"),
        )
        .order_by("first_hour", "pod", "pod_uid")
    )[: settings.GPUFINOPS_API_MAX_ROWS]
    return [
        PodUsage(
            team=r["team"], pod=r["pod"], pod_uid=r["pod_uid"], node=r["node"], node_group=r["node_group"],
            gpu_model=r["gpu_model"], resources=r["resources"], cluster_queue=r["cluster_queue"],
            local_queue=r["local_queue"], gpus=round_hours(r["gpus"]), first_hour=r["first_hour"],
            last_hour=r["last_hour"], hours=r["hours"],
            figures=UsageFigures(
                allocated_gpu_hours=round_hours(r["_allocated"]), working_gpu_hours=round_hours(r["_working"]),
                idle_gpu_hours=round_hours(r["_idle"]), unmeasured_gpu_hours=round_hours(r["_unmeasured"]),
                cost=money.micro(r["_cost"]), idle_cost=money.micro(r["_idle_cost"]),
                unpriced_gpu_hours=round_hours(r["_unpriced"]),
            ),
            allocation_mode=r["allocation_mode"],
        )
        for r in rows
    ]


@dataclass(frozen=True)
class Seen:
    """The first and last hour the ledger has any pod of a workload in (None for both when it has none)."""

    first: datetime | None
    last: datetime | None


def workload_seen(*, visible_teams: set[str] | None, cluster: str, namespace: str, workload: str) -> Seen:
    """The first and last hour the ledger has any pod of one workload in (over its whole history)."""
    qs = PodHour.objects.filter(cluster__name=cluster, namespace=namespace, workload=workload)
    if visible_teams is not None:
        qs = qs.filter(team__in=sorted(visible_teams))
    agg = qs.aggregate(first=Min("hour"), last=Max("hour"))
    return Seen(agg["first"], agg["last"])


def pod_workloads(pods: Iterable[tuple[str, datetime, str, str]]) -> dict[tuple[str, str, str], str]:
    """{(cluster, namespace, pod): workload} for pods named by (cluster, hour, namespace, pod), each at an hour
    the ledger has it (an idle allocation's cluster's latest bucket): one query per cluster and hour."""
    by_cluster: dict[tuple[str, datetime], set[tuple[str, str]]] = defaultdict(set)
    for cluster, hour, namespace, pod in pods:
        by_cluster[(cluster, hour)].add((namespace, pod))
    out: dict[tuple[str, str, str], str] = {}
    for (cluster, hour), names in by_cluster.items():
        pod_names = sorted({p for _, p in names})
        for batch in in_batches(pod_names):
            for namespace, pod, workload in PodHour.objects.filter(
                cluster__name=cluster, hour=hour, pod__in=batch
            ).values_list("namespace", "pod", "workload"):
                if (namespace, pod) in names:
                    out[(cluster, namespace, pod)] = workload
    return out


@dataclass(frozen=True)
class Traits:
    """Where a workload's pods ran and how their GPUs were handed out over a range (each sorted)."""

    node_groups: list[str]
    gpu_models: list[str]
    modes: list[str]


TeamWorkloadKey = tuple[str, str, str, str]  # team, cluster, namespace, workload


def workload_traits(*, start: datetime, end: datetime, visible_teams: set[str] | None,
                    workloads: Iterable[TeamWorkloadKey]) -> dict[TeamWorkloadKey, Traits]:
    """The node groups, GPU models and allocation modes of each of `workloads` (a page of a ranking) in
    `[start, end)`: read by the ledger's workload index, one query per `in_batches` slice of workload names."""
    wanted = set(workloads)
    names = sorted({w for _t, _c, _n, w in wanted})
    clusters = sorted({c for _t, c, _n, _w in wanted})
    found: dict[TeamWorkloadKey, tuple[set[str], set[str], set[str]]] = defaultdict(lambda: (set(), set(), set()))
    for batch in in_batches(names):
        qs = PodHour.objects.filter(cluster__name__in=clusters, workload__in=batch, hour__gte=start,
                                    hour__lt=end)
        if visible_teams is not None:
            qs = qs.filter(team__in=sorted(visible_teams))
        rows = qs.values_list("team", "cluster__name", "namespace", "workload", "node_group", "gpu_model",
                              "allocation_mode").distinct()
        for team, cluster, namespace, workload, group, model, mode in rows:
            key = (team, cluster, namespace, workload)
            if key in wanted:
                groups, models, modes = found[key]
                groups.add(group)
                models.add(model)
                modes.add(mode)
    return {key: Traits(sorted(g), sorted(m), sorted(a)) for key, (g, m, a) in found.items()}
