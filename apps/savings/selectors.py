"""Reads of the savings list (docs/savings.md): per team and fleet, ranked by dollars per month, each item a
workload, an action, the evidence it rests on and the assumptions behind its figure.

Nothing here recomputes idle time or cost: stop-idle items add up the listed idle findings' hours (their
charge), return-quota items the borrowed-while-idle findings' hours, and right-size items the ledger's pod-hours
(`PodHour`: activity under the default signal, charge) with the framebuffer the collection kept beside them
(`PodMemoryHour`); a move to a cheaper model adds the price card and the cluster's node groups (is the model in
the fleet). Visibility is `visible_teams` (`apps.accounts.selectors.visible_team_names`; None = every
team), as for the findings: a team member sees items of their teams only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

from django.conf import settings
from django.db.models import Q

from apps.findings.constants import IDLE_KINDS, Kind
from apps.findings.models import FindingHour
from apps.findings.selectors import finding_list, min_hours, visible_q
from apps.inventory.gpus.vocabulary import WHOLE
from apps.inventory.models import Cluster
from apps.inventory.selectors import gpu_nodes, price_for
from apps.usage import money
from apps.usage.activity import default_signal
from apps.usage.models import PodHour

from .models import PodMemoryHour
from .rules import (
    DAYS_PER_MONTH,
    HEADROOM,
    RIGHT_SIZE_MIN_HOURS,
    WHOLE_GPU,
    Action,
    Load,
    ModelMove,
    Offer,
    RightSize,
    cheaper_model,
    per_month,
    right_size,
)

HOUR = timedelta(hours=1)
RIGHT_SIZE_MODES = ("device_plugin", "mig")


@dataclass(frozen=True)
class Evidence:
    label: str
    value: str


@dataclass(frozen=True)
class Saving:
    """One action on one workload: the period's dollars it would have saved and their rate per 30 days."""

    cluster: str
    team: str
    namespace: str
    workload: str
    action: str
    summary: str  # the action in words: "Stop jupyter-alice-0 (idle 23 h of 24)"
    period_cost: Decimal  # dollars of the evidence period the action saves
    monthly: Decimal
    evidence: tuple[Evidence, ...]
    assumptions: tuple[str, ...]
    rank: int = 0

    @property
    def action_label(self) -> str:
        return Action.LABELS[self.action]

    def as_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "cluster": self.cluster, "team": self.team, "namespace": self.namespace,
                "workload": self.workload, "action": self.action, "summary": self.summary,
                "period_cost": self.period_cost, "monthly": self.monthly,
                "evidence": {e.label: e.value for e in self.evidence}, "assumptions": list(self.assumptions)}


@dataclass(frozen=True)
class TeamSavings:
    team: str
    items: int
    monthly: Decimal


@dataclass(frozen=True)
class SavingsList:
    start: datetime
    end: datetime
    items: list[Saving]
    teams: list[TeamSavings] = field(default_factory=list)

    @property
    def period_hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600

    @property
    def monthly(self) -> Decimal:
        return sum((s.monthly for s in self.items), money.ZERO)

    @property
    def period_cost(self) -> Decimal:
        return sum((s.period_cost for s in self.items), money.ZERO)


def _usd(value: Decimal) -> str:
    return f"${value.quantize(Decimal('0.01')):,}"


def _rate(value: Decimal) -> str:
    """A price per GPU-hour: in cents unless the price card has finer (`$0.80`, `$2.1875`)."""
    cents = value.quantize(Decimal("0.01"))
    return f"${cents}" if cents == value else f"${value.normalize():f}"


def _scaling(period_hours: float) -> str:
    return (f"Per month: the period's {period_hours:g} h scaled to {DAYS_PER_MONTH} days "
            f"(x {24 * DAYS_PER_MONTH / period_hours:.4g}), as if the period repeats.") if period_hours else ""


def _workload(workload: str, pod: str) -> str:
    return workload or (f"Pod/{pod}" if pod else "")


def _listed_hours(kinds: Iterable[str], *, visible_teams: set[str] | None, start: datetime, end: datetime,
                  teams: list[str], clusters: list[str]) -> list[FindingHour]:
    """The findings' hours inside `[start, end)` that belong to a listed run (long enough to be a finding)."""
    kinds = list(kinds)
    runs: dict[tuple[int, str, str], list[tuple[datetime, datetime]]] = defaultdict(list)
    for cluster_id, kind, subject, first, last in finding_list(
            visible_teams=visible_teams, start=start, end=end, kinds=kinds, teams=teams, clusters=clusters) \
            .values_list("cluster_id", "kind", "subject", "start", "last_hour"):
        runs[(cluster_id, kind, subject)].append((first, last))
    if not runs:
        return []
    hours = FindingHour.objects.filter(visible_q(visible_teams), kind__in=kinds, hour__gte=start, hour__lt=end,
                                       cluster_id__in=sorted({k[0] for k in runs}),
                                       subject__in=sorted({k[2] for k in runs})).select_related("cluster")
    return [h for h in hours.order_by("cluster__name", "hour", "subject")
            if any(a <= h.hour <= b for a, b in runs.get((h.cluster_id, h.kind, h.subject), ()))]


def stop_idle_items(*, visible_teams: set[str] | None, start: datetime, end: datetime, teams: list[str],
                    clusters: list[str]) -> list[Saving]:
    """One item per workload with idle findings in the period: stopping (or scaling down) would have saved the
    charge of its idle hours (the findings' cost: the whole allocation sat idle)."""
    groups: dict[tuple[str, str, str, str], list[FindingHour]] = defaultdict(list)
    for h in _listed_hours(IDLE_KINDS, visible_teams=visible_teams, start=start, end=end, teams=teams,
                           clusters=clusters):
        groups[(h.cluster.name, h.team, h.namespace, _workload(h.workload, h.pod))].append(h)
    period_hours = (end - start).total_seconds() / 3600
    out = []
    for (cluster, team, namespace, workload), rows in groups.items():
        cost = sum((money.to_decimal(r.cost) for r in rows), money.ZERO)
        allocated = sum(float(r.allocated_gpu_hours) for r in rows)
        idle = sum(float((r.detail or {}).get("sums", {}).get("idle_gpu_hours", 0)) for r in rows)
        working = sum(float((r.detail or {}).get("working_gpu_hours", 0)) for r in rows)
        pods = sorted({r.pod for r in rows if r.pod})
        held = any(r.kind == Kind.IDLE_HELD for r in rows)
        hours = len({r.hour for r in rows})
        activity = working / (working + idle) if working + idle > 0 else 0.0
        verb = "Scale down" if held else "Stop"
        out.append(Saving(
            cluster=cluster, team=team, namespace=namespace, workload=workload, action=Action.STOP_IDLE,
            summary=f"{verb} {workload or ', '.join(pods)}: idle {hours} h of the period"
                    + (" while holding GPU memory" if held else ""),
            period_cost=cost, monthly=per_month(cost, period_hours),
            evidence=(
                Evidence("idle hours", f"{hours} h ({', '.join(sorted({r.kind for r in rows}))}, runs of at least "
                                       f"{min_hours(Kind.IDLE_ALLOCATION)} h)"),
                Evidence("pods", ", ".join(pods)),
                Evidence("GPU-hours allocated while idle", f"{allocated:,.2f}"),
                Evidence("activity while idle", f"{activity:.1%} ({default_signal()}, idle below "
                                                f"{settings.GPUFINOPS_IDLE_THRESHOLD:.0%})"),
                Evidence("charge of those hours", _usd(cost)),
            ),
            assumptions=(
                "Saves the charge of the idle hours: the whole allocation sat idle, so stopping it (or scaling "
                "to zero) gives back all of it.",
                _scaling(period_hours),
            ),
        ))
    return out


def return_quota_items(*, visible_teams: set[str] | None, start: datetime, end: datetime, teams: list[str],
                       clusters: list[str]) -> list[Saving]:
    """One item per ClusterQueue that borrowed GPUs from its cohort while its own pods sat idle (the
    borrowed-while-idle findings): giving the quota back would have saved the idle share of what it borrowed."""
    groups: dict[tuple[str, str, str], list[FindingHour]] = defaultdict(list)
    for h in _listed_hours([Kind.BORROWED_IDLE], visible_teams=visible_teams, start=start, end=end, teams=teams,
                           clusters=clusters):
        groups[(h.cluster.name, h.team, h.subject)].append(h)
    period_hours = (end - start).total_seconds() / 3600
    out = []
    for (cluster, team, queue), rows in groups.items():
        cost = sum((money.to_decimal(r.cost) for r in rows), money.ZERO)
        borrowed_idle = sum(float(r.gpu_hours) for r in rows)
        borrowed = sum(float((r.detail or {}).get("borrowed_gpu_hours", 0)) for r in rows)
        nominal = rows[-1].detail.get("nominal_gpus", "")
        out.append(Saving(
            cluster=cluster, team=team, namespace="", workload=f"ClusterQueue/{queue}", action=Action.RETURN_QUOTA,
            summary=f"Return the GPUs {queue} borrows from cohort {rows[-1].detail.get('cohort', '')} while idle",
            period_cost=cost, monthly=per_month(cost, period_hours),
            evidence=(
                Evidence("hours", f"{len({r.hour for r in rows})} h borrowing while idle"),
                Evidence("GPU-hours borrowed", f"{borrowed:,.2f}"),
                Evidence("of which idle", f"{borrowed_idle:,.2f} GPU-hours"),
                Evidence("nominal quota", f"{nominal} GPUs"),
                Evidence("charge of the idle borrowed share", _usd(cost)),
            ),
            assumptions=(
                "Saves the idle share of the borrowed GPUs' charge (the queue's idle cost x borrowed idle / idle): "
                "the lender's pending work gets them back.",
                "The same idle hours may also be listed as the queue's idle pods' stop items: do not add both.",
                _scaling(period_hours),
            ),
        ))
    return out


def _offers(*, visible_teams: set[str] | None, cluster: str, day: date) -> tuple[dict[str, Decimal], list[Offer]]:
    """The cluster's GPU models with their price in force on `day` (None: unpriced), and the offers: each priced
    model with the node groups of ready, schedulable nodes handing out whole GPUs (`sharing` none)."""
    groups: dict[str, set[str]] = defaultdict(set)
    nodes: dict[str, Cluster] = {}
    for node in gpu_nodes(visible_teams=visible_teams, clusters={cluster}).exclude(gpu_model=""):
        nodes.setdefault(node.gpu_model, node.cluster)
        if node.sharing == WHOLE and node.ready and not node.unschedulable:
            groups[node.gpu_model].add(node.node_group.name)
    prices = {m: p for m, c in nodes.items() if (p := price_for(c, m, day)) is not None}
    return prices, [Offer(m, prices[m], tuple(sorted(groups[m]))) for m in sorted(prices) if groups[m]]


def _mig_saving(fit: RightSize, charge: Decimal) -> Decimal:
    return (charge * fit.saved_share).quantize(money.MICRO)


def _move_saving(move: ModelMove, charge: Decimal, gpu_hours: float) -> Decimal:
    """The ledger's charge of the hours less the same GPU-hours at the target's price ((price M - price C) x
    GPU-hours while M's price held)."""
    return (charge - move.target_price * Decimal(repr(round(gpu_hours, 6)))).quantize(money.MICRO)


class _Option(NamedTuple):
    """One way to right-size a workload: its dollars in the period, what the item says, and its words as the
    alternative of another."""

    dollars: Decimal
    action: str
    summary: str
    evidence: tuple[Evidence, ...]
    assumption: str
    words: str


def _move_option(move: ModelMove | None, dollars: Decimal | None, workload: str, model: str, cluster: str,
                 peak_act: float, peak_fb: float, signal: str, peaks: str, end: datetime) -> _Option | None:
    if move is None or dollars is None:
        return None
    groups = ", ".join(move.node_groups)
    return _Option(dollars, Action.CHEAPER_MODEL, f"Move {workload} from a whole {model} to a whole {move.model}", (
        Evidence("peak activity", f"{peak_act:.1%} of the GPU ({signal}, {peaks}) x {move.current.dense_tflops:g} "
                                  f"TFLOPS ({move.current.family}) + headroom = "
                                  f"{move.compute_needed_tflops:,.1f} TFLOPS"),
        Evidence("peak framebuffer", f"{peak_fb:,.0f} MiB (largest hourly average) + headroom = "
                                     f"{move.memory_needed_mib:,.0f} MiB"),
        Evidence("target", f"{move.model} ({move.target.family}): {move.target.dense_tflops:g} TFLOPS, "
                           f"{move.target.framebuffer_mib:,} MiB"),
        Evidence("placeable on", f"node group(s) {groups} of {cluster} (whole {move.model} GPUs)"),
        Evidence("prices", f"{model} {_rate(move.current_price)}/GPU-hour, {move.model} "
                           f"{_rate(move.target_price)}/GPU-hour (price card, {(end - HOUR).date()})"),
    ), "Compute compared as dense FP16/BF16 Tensor Core TFLOPS (NVIDIA's datasheets): the load is assumed to scale "
       "with it; benchmark the workload on the target before moving. Saves the charge less the same GPU-hours at "
       f"{move.model}'s price ((price of {model} - price of {move.model}) x GPU-hours); the freed {model} finds "
       "another tenant.", f"a whole {move.model} (node group(s) {groups})")


def _mig_option(fit: RightSize | None, dollars: Decimal | None, workload: str, model: str, peak_act: float,
                peak_fb: float, signal: str, peaks: str) -> _Option | None:
    if fit is None or dollars is None:
        return None
    summary = f"Move {workload} from {fit.current} of {model} to MIG {fit.target.name}"
    return _Option(dollars, Action.RIGHT_SIZE, summary, (
        Evidence("peak activity", f"{peak_act:.1%} of what it holds ({signal}, {peaks}) = {fit.slices_needed} of "
                                  f"{fit.current_slices} slices with headroom"),
        Evidence("peak framebuffer", f"{peak_fb:,.0f} MiB (largest hourly average) + headroom = "
                                     f"{fit.memory_needed_mib:,.0f} MiB"),
        Evidence("target", f"{fit.target.name}: {fit.target.slices} slices, {fit.target.memory_mib:,.0f} MiB usable"),
    ), f"Saves {fit.saved_share:.1%} of the charge: a MIG instance is charged its slices' share of the GPU (the price "
       "card's rule), and the freed slices find another tenant.", f"MIG {fit.target.name} of the same {model}")


def right_size_items(*, visible_teams: set[str] | None, start: datetime, end: datetime, teams: list[str],
                     clusters: list[str], skip: set[tuple[str, str, str]]) -> list[Saving]:
    """One item per workload on one whole GPU or one MIG instance whose peak hourly activity and framebuffer fit a
    smaller MIG profile of its model (`rules.right_size`) or, on one whole GPU, a cheaper model of the price card in
    the fleet (`rules.cheaper_model`): the one that saves more, the other shown as an alternative; `skip` (cluster,
    namespace, workload): workloads that already have a stop item."""
    signal = default_signal()
    # Only rows of one unit can be right-sized (`mig.unit_slices`): the database leaves out the rest.
    one_unit = Q(resources=WHOLE_GPU) | (Q(resources__startswith="nvidia.com/mig-")
                                         & Q(resources__endswith="=1") & ~Q(resources__contains=","))
    rows = PodHour.objects.filter(one_unit, hour__gte=start, hour__lt=end, allocation_mode__in=RIGHT_SIZE_MODES)
    if visible_teams is not None:
        rows = rows.filter(team__in=sorted(visible_teams))
    if teams:
        rows = rows.filter(team__in=teams)
    if clusters:
        rows = rows.filter(cluster__name__in=clusters)
    fields = ("cluster_id", "cluster__name", "hour", "namespace", "pod", "workload", "team", "gpu_model",
              "resources", "gpus", "allocated_gpu_hours", f"working_{signal}", f"unmeasured_{signal}", "cost")
    values = [dict(zip(fields, v, strict=True)) for v in rows.values_list(*fields)]
    if not values:
        return []
    memory = {(c, h, ns, p): fb for c, h, ns, p, fb in PodMemoryHour.objects.filter(
        hour__gte=start, hour__lt=end, cluster_id__in=sorted({v["cluster_id"] for v in values}))
        .values_list("cluster_id", "hour", "namespace", "pod", "fb_used_mib")}
    groups: dict[tuple[str, str, str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for v in values:
        groups[(v["cluster__name"], v["team"], v["namespace"], _workload(v["workload"], v["pod"]), v["gpu_model"],
                v["resources"])].append(v)
    period_hours = (end - start).total_seconds() / 3600
    offers: dict[str, tuple[dict[str, Decimal], list[Offer]]] = {}
    out = []
    for (cluster, team, namespace, workload, model, resources), group in sorted(groups.items()):
        if (cluster, namespace, workload) in skip:
            continue
        peak_act, peak_fb, measured = 0.0, 0.0, 0
        for g in group:
            fb = memory.get((g["cluster_id"], g["hour"], g["namespace"], g["pod"]))
            measured_hours = g["allocated_gpu_hours"] - g[f"unmeasured_{signal}"]
            if measured_hours <= 0 or fb is None:
                continue
            measured += 1
            peak_act = max(peak_act, g[f"working_{signal}"] / measured_hours)
            peak_fb = max(peak_fb, fb)
        load = Load(model, resources, min(g["gpus"] for g in group), peak_act, peak_fb, measured)
        fit = right_size(load)
        move = None
        if load.resources == WHOLE_GPU and measured >= RIGHT_SIZE_MIN_HOURS:
            if cluster not in offers:
                offers[cluster] = _offers(visible_teams=visible_teams, cluster=cluster, day=(end - HOUR).date())
            prices, cluster_offers = offers[cluster]
            move = cheaper_model(load, prices.get(model), cluster_offers)
        if fit is None and move is None:
            continue
        charge = sum((money.to_decimal(g["cost"]) for g in group), money.ZERO)
        gpu_hours = sum(g["allocated_gpu_hours"] for g in group)
        pods = sorted({g["pod"] for g in group})
        mig_cost = _mig_saving(fit, charge) if fit is not None else None
        move_cost = _move_saving(move, charge, gpu_hours) if move is not None else None
        peaks = f"largest hourly average of {measured} measured pod-hours"
        options = [o for o in (_move_option(move, move_cost, workload, model, cluster, peak_act, peak_fb, signal,
                                            peaks, end),
                               _mig_option(fit, mig_cost, workload, model, peak_act, peak_fb, signal, peaks))
                   if o is not None]
        # The one that saves more (a MIG profile on a tie); the other beside it.
        best, *others = sorted(options, key=lambda o: (-o.dollars, o.action != Action.RIGHT_SIZE))
        out.append(Saving(
            cluster=cluster, team=team, namespace=namespace, workload=workload, action=best.action,
            summary=best.summary, period_cost=best.dollars, monthly=per_month(best.dollars, period_hours),
            evidence=(
                Evidence("held", f"{'whole GPU' if fit is None else fit.current} of {model} ({resources}) per pod, "
                                 f"{len(pods)} pod(s), {gpu_hours:,.2f} GPU-hours"),
                *best.evidence,
                Evidence("charge in the period", _usd(charge)),
                *(Evidence("alternative", f"{o.words}: {_usd(o.dollars)} in the period (saves less)") for o in others),
            ),
            assumptions=(
                f"Headroom {HEADROOM:.0%} over the peaks; peaks are hourly averages (a shorter burst is not seen); at "
                f"least {RIGHT_SIZE_MIN_HOURS} measured hours.",
                best.assumption,
                _scaling(period_hours),
            ),
        ))
    return out


def savings_list(*, visible_teams: set[str] | None, start: datetime, end: datetime, team: str | None = None,
                 cluster: str | None = None) -> SavingsList:
    """Every saving the caller may see over `[start, end)` (one team or cluster when named), ranked by dollars per
    month (then cluster, namespace, workload), with each team's total."""
    teams = [team] if team else []
    clusters = [cluster] if cluster else []
    scope: dict[str, Any] = {"visible_teams": visible_teams, "start": start, "end": end, "teams": teams,
                             "clusters": clusters}
    stop = stop_idle_items(**scope)
    items = [*stop, *return_quota_items(**scope),
             *right_size_items(**scope, skip={(s.cluster, s.namespace, s.workload) for s in stop})]
    items = [s for s in items if s.period_cost > 0]
    items.sort(key=lambda s: (-s.monthly, s.cluster, s.namespace, s.workload, s.action))
    ranked = [Saving(**{**s.__dict__, "rank": i}) for i, s in enumerate(items, 1)]
    per_team: dict[str, list[Saving]] = defaultdict(list)
    for s in ranked:
        per_team[s.team].append(s)
    totals = [TeamSavings(t, len(v), sum((s.monthly for s in v), money.ZERO)) for t, v in per_team.items()]
    totals.sort(key=lambda t: (-t.monthly, t.team))
    return SavingsList(start=start, end=end, items=ranked, teams=totals)
