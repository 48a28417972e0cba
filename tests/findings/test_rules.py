"""The finding rules (`apps.findings.rules`) as pure functions: one table per rule, edges included, no database and
no services. Every expected figure is worked out by hand in the case's comment (docs/findings.md states the rules).

The world of most tables: node `n1`, a whole-GPU node of 8 A100s at $2 per GPU-hour, present the whole hour; pods
on it hold GPUs named `GPU-1`, `GPU-2`... through their DCGM series.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal as D

import pytest

from apps.findings import rules
from apps.findings.constants import Kind
from apps.findings.rules import HourFinding, NodeHourFigures, Params, PodFigures, StillGone
from apps.inventory.gpus import MIG_MIXED, MIG_SINGLE, TIME_SLICING, WHOLE, GpuNode
from apps.usage.activity import metrics_fix
from apps.usage.ledger import BucketResult, NodeFact, PodFact, PodRow, SeriesFact
from apps.usage.sources import DeviceActivity, DeviceHealth, VanishedDevice

HOUR = 3600.0
A100 = "NVIDIA-A100-SXM4-80GB"
A30 = "NVIDIA-A30"
P = Params()  # the defaults: sm_active, idle below 0.01, held above 1024 MiB, straggler below 0.6 x median


def pod(uid: str = "u1", *, name: str = "", namespace: str = "ns", workload: str = "Job/w", team: str = "t",
        node: str = "n1", gpus: float = 1.0, allocated: float = 1.0, working: float = 0.0, idle: float = 1.0,
        unmeasured: float = 0.0, price: D | None = D("2")) -> PodFigures:
    return PodFigures(uid=uid, namespace=namespace, pod=name or f"p-{uid}", workload=workload, team=team, node=node,
                      node_group="g", gpu_model=A100, gpus=gpus, held_seconds=HOUR, allocated=allocated,
                      working=working, idle=idle, unmeasured=unmeasured, price=price)


def series(pod_name: str, uuid: str, value: float | None = 0.5, *, gi: str = "", profile: str = "",
           replica: str = "", namespace: str = "ns") -> SeriesFact:
    values = {} if value is None else {"sm_active": value}
    return SeriesFact(namespace=namespace, pod=pod_name, uuid=uuid, gpu_instance_id=gi, profile=profile,
                      values=values, replica=replica)


def node(name: str = "n1", *, sharing: str = WHOLE, model: str = A100, slices: int = 7, present: float = HOUR,
         unavailable: bool = False, price: D | None = D("2")) -> NodeFact:
    gpu = GpuNode(gpu_model=model, physical_gpus=8, sharing=sharing, compute_slices=slices)
    return NodeFact(name=name, node_group="g", gpu=gpu, present_seconds=present, unavailable=unavailable, price=price)


def nodes(*facts: NodeFact) -> dict[str, NodeFact]:
    return {fact.name: fact for fact in facts or (node(),)}


# ---- The small rules: GPU-hours, money, details, activity ----


@pytest.mark.parametrize(("value", "expected"), [
    (0.1, D("0.100000000")),  # the float's shortest repr, not its binary expansion (0.1000000000000000055...)
    (1 / 3, D("0.333333333")),
    (2 / 3, D("0.666666667")),
    (0.0, D("0E-9")),
    (D("1.0000000005"), D("1.000000000")),  # a Decimal is rounded half to even: down to the even 0
    (D("1.0000000015"), D("1.000000002")),  # ... and up to the even 2
])
def test_gh_keeps_gpu_hours_to_a_nanohour(value, expected):
    assert rules.gh(value) == expected
    assert rules.gh(value).as_tuple().exponent == -9


@pytest.mark.parametrize(("hours", "price", "expected"), [
    (1.5, D("2"), (D("3.000000"), D(0))),  # priced: the ledger's cost, nothing unpriced
    (1 / 3, D("3"), (D("1.000000"), D(0))),  # 0.3333333333333333 x 3 to the micro-dollar
    (1.5, None, (D(0), D("1.500000000"))),  # no price: no cost known, the hours are unpriced
    (0.0, None, (D(0), D(0))),
])
def test_priced_is_the_ledgers_money_rule(hours, price, expected):
    assert rules.priced(hours, price) == expected


def test_plain_stores_a_detail_as_json_returns_it():
    assert rules.plain({"b": (1, 2), "a": D("1.50"), "c": {"d": None}}) == {"a": "1.50", "b": [1, 2], "c": {"d": None}}


@pytest.mark.parametrize(("working", "idle", "unmeasured", "expected"), [
    (0.3, 0.7, 0.0, 0.3),
    (0.0, 1.0, 0.0, 0.0),
    (0.5, 0.0, 0.5, 1.0),  # unmeasured hours are neither working nor idle
    (0.0, 0.0, 1.0, None),  # nothing measured: no activity at all (never idle, never busy)
])
def test_pod_activity_is_working_over_measured(working, idle, unmeasured, expected):
    assert pod(working=working, idle=idle, unmeasured=unmeasured).activity == expected


def test_pods_from_result_reads_the_signal_asked_for():
    fact = PodFact(uid="u1", namespace="ns", name="p1", node="n1", team="t", requests={"nvidia.com/gpu": 2.0},
                   held_seconds=1800.0, workload="Job/w")
    row = PodRow(fact=fact, node_group="g", gpu_model=A100, gpus=2.0, price=D("2"), allocated=1.0,
                 working={"sm_active": 0.25, "gpu_util": 0.75}, idle={"sm_active": 0.5, "gpu_util": 0.25},
                 unmeasured={"sm_active": 0.25, "gpu_util": 0.0})
    [figures] = rules.pods_from_result(BucketResult(pods=[row], nodes=[]), "gpu_util")
    assert figures == PodFigures(uid="u1", namespace="ns", pod="p1", workload="Job/w", team="t", node="n1",
                                 node_group="g", gpu_model=A100, gpus=2.0, held_seconds=1800.0, allocated=1.0,
                                 working=0.75, idle=0.25, unmeasured=0.0, price=D("2"))


def test_hour_of_truncates_to_the_hour():
    assert rules.hour_of(datetime(2026, 11, 20, 13, 59, 59, 999, tzinfo=UTC)) == datetime(2026, 11, 20, 13, tzinfo=UTC)


# ---- Idle allocations and idle-held ----

# (case, pod, memory (largest average framebuffer MiB of the pod), expected kind or None)
IDLE_CASES = [
    ("nothing working", pod(working=0.0, idle=1.0), None, Kind.IDLE_ALLOCATION),
    ("just below the threshold", pod(working=0.009, idle=0.991), None, Kind.IDLE_ALLOCATION),
    ("at the threshold is not idle", pod(working=0.01, idle=0.99), None, None),  # activity 0.01, not < 0.01
    ("busy", pod(working=0.5, idle=0.5), None, None),
    ("nothing measured is never idle", pod(working=0.0, idle=0.0, unmeasured=1.0), None, None),
    ("a little memory", pod(), 512.0, Kind.IDLE_ALLOCATION),
    ("memory at the limit is not held", pod(), 1024.0, Kind.IDLE_ALLOCATION),  # held needs more than 1024 MiB
    ("memory above the limit: held", pod(), 1024.5, Kind.IDLE_HELD),
]


@pytest.mark.parametrize(("case", "figures", "fb", "kind"), IDLE_CASES, ids=[c[0] for c in IDLE_CASES])
def test_idle_kind(case, figures, fb, kind):
    memory = {} if fb is None else {("ns", figures.pod): fb}
    found = rules.idle([figures], memory, P)
    assert [f.kind for f in found] == ([kind] if kind else [])
    if found and fb is not None:
        assert found[0].detail["fb_used_mib"] == fb
    if found and fb is None:
        assert "fb_used_mib" not in found[0].detail


def test_idle_threshold_comes_from_params():
    busyish = pod(working=0.2, idle=0.8)  # activity 0.2
    assert rules.idle([busyish], {}, P) == []
    assert [f.kind for f in rules.idle([busyish], {}, replace(P, idle_threshold=0.25))] == [Kind.IDLE_ALLOCATION]


def test_idle_figures_are_the_whole_allocation_and_the_idle_part_is_in_the_detail():
    # 2 GPUs held the hour at $3: 2 allocated GPU-hours ($6), 1.5 of them measured idle ($4.50), 0.5 unmeasured.
    figures = pod(gpus=2.0, allocated=2.0, working=0.0, idle=1.5, unmeasured=0.5, price=D("3"))
    [found] = rules.idle([figures], {}, P, devices={("ns", "p-u1"): "GPU-1"})
    assert found == HourFinding(
        kind=Kind.IDLE_ALLOCATION, subject="u1", team="t", namespace="ns", workload="Job/w", pod="p-u1", node="n1",
        gpu_uuid="GPU-1", gpu_hours=D("2"), cost=D("6"), unpriced_gpu_hours=D(0), allocated_gpu_hours=D("2"),
        allocated_cost=D("6"),
        detail={"activity": 0.0, "gpus": 2.0, "node_group": "g", "gpu_model": A100, "working_gpu_hours": 0.0,
                "idle_gpu_hours": 1.5, "unmeasured_gpu_hours": 0.5, "idle_cost": "4.500000",
                "sums": {"idle_gpu_hours": "1.500000000", "idle_cost": "4.500000"}},
    )


def test_idle_without_a_price_is_unpriced_and_without_a_device_names_no_gpu():
    [found] = rules.idle([pod(allocated=1.5, idle=1.5, price=None)], {}, P)
    assert (found.cost, found.unpriced_gpu_hours, found.allocated_cost, found.gpu_uuid) == (D(0), D("1.5"), D(0), "")
    assert found.detail["idle_cost"] == "0"


# ---- Which device series stand for which pod ----


def test_first_devices_names_the_first_uuid_of_each_pod_in_sorted_order():
    found = rules.first_devices([series("a", "GPU-b"), series("a", "GPU-a", gi="1"), series("b", "GPU-c")])
    assert found == {("ns", "a"): "GPU-a", ("ns", "b"): "GPU-c"}


# (case, the pod's series, signal filter, expected GPU-hours per device key (uuid, gi, replica))
POD_DEVICES_CASES = [
    ("two GPUs share the allocation evenly", [series("p-u1", "G1"), series("p-u1", "G2")], None,
     {("G1", "", ""): 1.0, ("G2", "", ""): 1.0}),
    ("a repeated series is one device", [series("p-u1", "G1"), series("p-u1", "G1", 0.9)], None,
     {("G1", "", ""): 2.0}),
    ("MIG instances of one GPU are devices", [series("p-u1", "G1", gi="1"), series("p-u1", "G1", gi="2")], None,
     {("G1", "1", ""): 1.0, ("G1", "2", ""): 1.0}),
    ("replicas of one GPU are devices", [series("p-u1", "G1", replica="0"), series("p-u1", "G1", replica="1")], None,
     {("G1", "", "0"): 1.0, ("G1", "", "1"): 1.0}),
    ("another pod's series is not the pod's", [series("p-u1", "G1"), series("other", "G2")], None,
     {("G1", "", ""): 2.0}),
    ("with a signal: NaN, missing and out-of-range values are left out",
     [series("p-u1", "G1", math.nan), series("p-u1", "G2", None), series("p-u1", "G3", 1.5),
      series("p-u1", "G4", -0.5), series("p-u1", "G5", 0.4)], "sm_active", {("G5", "", ""): 2.0}),
    ("with a signal: float noise at the ends is kept",
     [series("p-u1", "G1", -1e-10), series("p-u1", "G2", 1.0 + 1e-7)], "sm_active",
     {("G1", "", ""): 1.0, ("G2", "", ""): 1.0}),
    ("no valid series: the pod is absent", [series("p-u1", "G1", None)], "sm_active", None),
]


@pytest.mark.parametrize(("case", "facts", "signal", "expected"), POD_DEVICES_CASES,
                         ids=[c[0] for c in POD_DEVICES_CASES])
def test_pod_devices_splits_the_allocation_over_distinct_device_series(case, facts, signal, expected):
    found = rules.pod_devices([pod(allocated=2.0, gpus=2.0)], facts, signal)
    if expected is None:
        assert found == {}
    else:
        assert {(s.uuid, s.gpu_instance_id, s.replica): hours for s, hours in found["u1"]} == expected


# ---- Stragglers ----

# (case, activity per GPU of one pod of workload Job/w holding one GPU-hour per GPU, node sharing, flagged?)
STRAGGLER_CASES = [
    ("slowest below 0.6 x median", [0.9, 0.3], WHOLE, True),  # median 0.6, 0.3 < 0.36
    ("slowest exactly 0.6 x median is not", [0.5, 0.5, 0.3], WHOLE, False),  # median 0.5, 0.3 == 0.3
    ("slowest just below 0.6 x median", [0.5, 0.5, 0.29], WHOLE, True),
    ("median below the idle threshold: an idle workload, not a straggler", [0.009, 0.0], WHOLE, False),
    ("one GPU has nobody to wait for", [0.9], WHOLE, False),
    ("all alike", [0.8, 0.8, 0.8], WHOLE, False),
    ("time-sliced replicas report their device's value: left out", [0.9, 0.1], TIME_SLICING, False),
]


@pytest.mark.parametrize(("case", "values", "sharing", "flagged"), STRAGGLER_CASES,
                         ids=[c[0] for c in STRAGGLER_CASES])
def test_straggler_flagged(case, values, sharing, flagged):
    n = len(values)
    facts = [series("p-u1", f"GPU-{i}", v) for i, v in enumerate(values)]
    found = rules.stragglers([pod(gpus=n, allocated=float(n))], facts, nodes(node(sharing=sharing)), P)
    assert [f.kind for f in found] == ([Kind.STRAGGLER] if flagged else [])


def test_straggler_waste_is_the_time_the_faster_gpus_wait():
    # GPU-0 at 0.9, GPU-1 at 0.3, one GPU-hour each at $2: GPU-0 waits 1 - 0.3/0.9 = 2/3 of its hour.
    facts = [series("p-u1", "GPU-0", 0.9), series("p-u1", "GPU-1", 0.3)]
    [found] = rules.stragglers([pod(gpus=2.0, allocated=2.0)], facts, nodes(), P)
    assert found == HourFinding(
        kind=Kind.STRAGGLER, subject="ns/Job/w", team="t", namespace="ns", workload="Job/w", pod="p-u1", node="n1",
        gpu_uuid="GPU-1", gpu_hours=D("0.666666667"), cost=D("1.333333"), unpriced_gpu_hours=D(0),
        allocated_gpu_hours=D("2"), allocated_cost=D("4"),
        detail={"units": 2, "slowest": 0.3, "median": 0.6, "fastest": 0.9, "ratio": 0.5, "slowest_gpu": "GPU-1",
                "gpu_instance_id": "", "pods": 1, "signal": "sm_active"},
    )


def test_straggler_across_pods_names_the_slowest_pod_and_prices_each_pods_wait():
    # Two pods of one workload, one GPU each. a (team x, unpriced) at 0.9 waits 1 - 0.2/0.9 = 7/9 of its hour;
    # b (team y, $2) is the slowest at 0.2 and waits for nobody. A GPU at 0 waits for nobody either.
    pods = [pod("a", team="x", price=None), pod("b", team="y")]
    facts = [series("p-a", "GPU-0", 0.9), series("p-b", "GPU-1", 0.2)]
    [found] = rules.stragglers(pods, facts, nodes(), P)
    assert (found.team, found.pod, found.gpu_uuid) == ("y", "p-b", "GPU-1")
    assert (found.gpu_hours, found.cost, found.unpriced_gpu_hours) == (D("0.777777778"), D(0), D("0.777777778"))
    assert (found.allocated_gpu_hours, found.allocated_cost) == (D("2"), D("2"))  # only b's hour is priced
    assert found.detail["pods"] == 2


def test_straggler_a_stopped_gpu_makes_the_others_wait_the_whole_hour():
    # 0.8, 0.8, 0.0 over three GPU-hours: the slowest is 0, each other GPU waits 1 - 0/0.8 = its whole hour.
    facts = [series("p-u1", "GPU-0", 0.8), series("p-u1", "GPU-1", 0.8), series("p-u1", "GPU-2", 0.0)]
    [found] = rules.stragglers([pod(gpus=3.0, allocated=3.0)], facts, nodes(), P)
    assert (found.gpu_hours, found.cost, found.detail["ratio"]) == (D("2"), D("4"), 0.0)


def test_stragglers_are_judged_per_workload_and_skip_replica_series():
    pods = [pod("a", workload="Job/one"), pod("b", workload="Job/two")]
    facts = [series("p-a", "GPU-0", 0.9), series("p-b", "GPU-1", 0.1)]  # one GPU per workload: no straggler
    assert rules.stragglers(pods, facts, nodes(), P) == []
    replicas = [series("p-u1", "GPU-0", 0.9, replica="0"), series("p-u1", "GPU-1", 0.1, replica="1")]
    assert rules.stragglers([pod(gpus=2.0, allocated=2.0)], replicas, nodes(), P) == []


# ---- Clock events ----

# The default throttle mask 0xE8 counts hw_slowdown (0x8), sw_thermal (0x20), hw_thermal (0x40), hw_power_brake (0x80).
THROTTLE_CASES = [
    ("no clock events", None, 0xE8, (0.0, [])),
    ("never set", (0, 0, 0.0), 0xE8, (0.0, [])),
    ("counted reason the whole hour", (0x40, 0x40, 64.0), 0xE8, (1.0, ["hw_thermal"])),
    ("uncounted reason (gpu_idle) the whole hour", (0x1, 0x1, 1.0), 0xE8, (0.0, [])),
    ("counted and uncounted bits together", (0xC, 0xC, 12.0), 0xE8, (1.0, ["hw_slowdown"])),
    ("a quarter of the hour, from the mean", (0, 0x8, 2.0), 0xE8, (0.25, ["hw_slowdown"])),  # (2 - 0) / (8 - 0)
    ("counted at both ends: the whole hour", (0x8, 0x48, 40.0), 0xE8, (1.0, ["hw_slowdown", "hw_thermal"])),
    ("a mean past the ends is clamped", (0, 0x8, 100.0), 0xE8, (1.0, ["hw_slowdown"])),
    ("a mask of 0 counts nothing", (0x40, 0x40, 64.0), 0, (0.0, [])),
]


@pytest.mark.parametrize(("case", "clock", "mask", "expected"), THROTTLE_CASES, ids=[c[0] for c in THROTTLE_CASES])
def test_throttle_share(case, clock, mask, expected):
    assert rules.throttle_share(clock, mask) == expected


# ---- Unhealthy GPUs ----

XID = replace(P, xid_codes=frozenset({48, 79}))
LAST_SEEN = datetime(2026, 11, 20, 12, 40, tzinfo=UTC)

# (case, health reports of GPU-1 on n1, params, expected reasons)
HEALTH_CASES = [
    ("an XID of the list", DeviceHealth("n1", "GPU-1", xid_codes=(13, 79)), XID, ["xid"]),
    ("an XID off the list", DeviceHealth("n1", "GPU-1", xid_codes=(13,)), XID, []),
    ("an XID with no list", DeviceHealth("n1", "GPU-1", xid_codes=(79,)), P, []),
    ("throttled, any share counts", DeviceHealth("n1", "GPU-1", clock_events=(0, 8, 2.0)), P, ["throttle"]),
    ("throttled below the minimum share", DeviceHealth("n1", "GPU-1", clock_events=(0, 8, 2.0)),
     replace(P, throttle_min_share=0.5), []),
    ("throttled at the minimum share", DeviceHealth("n1", "GPU-1", clock_events=(0, 8, 2.0)),
     replace(P, throttle_min_share=0.25), ["throttle"]),
    ("only uncounted clock reasons", DeviceHealth("n1", "GPU-1", clock_events=(1, 1, 1.0)), P, []),
    ("a row-remap failure", DeviceHealth("n1", "GPU-1", row_remap_failure=True), P, ["remap"]),
    ("uncorrectable rows remapped", DeviceHealth("n1", "GPU-1", uncorrectable_remapped_rows=2.0), P, ["remap"]),
    ("double-bit ECC errors", DeviceHealth("n1", "GPU-1", ecc_dbe=1.0), P, ["ecc"]),
    ("violations alone are not a reason", DeviceHealth("n1", "GPU-1", power_violation_seconds=30.0), P, []),
    ("every reason at once: one finding each",
     DeviceHealth("n1", "GPU-1", xid_codes=(48,), clock_events=(0x40, 0x40, 64.0), row_remap_failure=True,
                  ecc_dbe=3.0), XID, ["ecc", "remap", "throttle", "xid"]),
]


@pytest.mark.parametrize(("case", "health", "params", "reasons"), HEALTH_CASES, ids=[c[0] for c in HEALTH_CASES])
def test_unhealthy_reasons(case, health, params, reasons):
    found = rules.unhealthy([health], [], [], [pod()], [series("p-u1", "GPU-1")], nodes(), HOUR, params)
    assert sorted(f.detail["reason"] for f in found) == reasons
    assert all(f.kind == Kind.UNHEALTHY_GPU and f.subject == f"n1/GPU-1/{f.detail['reason']}" for f in found)


def test_unhealthy_figures_are_the_gpus_hour_and_its_holders_charge():
    # GPU-1 on n1 ($2) for the hour: 1 GPU-hour, $2. Its holder p-u1 holds 2 GPUs (GPU-1, GPU-2) for the hour:
    # 1 GPU-hour of it on GPU-1, charged $2: the infra loss.
    found = rules.unhealthy([DeviceHealth("n1", "GPU-1", xid_codes=(79,))], [], [], [pod(gpus=2.0, allocated=2.0)],
                            [series("p-u1", "GPU-1"), series("p-u1", "GPU-2")], nodes(), HOUR, XID)
    holder = {"team": "t", "namespace": "ns", "workload": "Job/w", "pod": "p-u1", "gpu_hours": 1.0,
              "cost": "2.000000"}
    assert found == [HourFinding(
        kind=Kind.UNHEALTHY_GPU, subject="n1/GPU-1/xid", team="t", namespace="ns", workload="Job/w", pod="p-u1",
        node="n1", gpu_uuid="GPU-1", gpu_hours=D("1"), cost=D("2"), unpriced_gpu_hours=D(0),
        allocated_gpu_hours=D("1"), allocated_cost=D("2"),
        detail={"reason": "xid", "xid_codes": [79], "holders": [holder], "tags": ["xid", "xid:79"],
                "sums": {"holder:t|ns|Job/w|p-u1": "1.000000000"}},
    )]


def test_unhealthy_throttle_detail_and_an_unpriced_node_without_holders():
    # Throttled a quarter of a half-hour bucket (provisional): 450 s; nobody holds GPU-7; n1 has no price.
    health = DeviceHealth("n1", "GPU-7", clock_events=(0, 8, 2.0), power_violation_seconds=12.5)
    [found] = rules.unhealthy([health], [], [], [], [], nodes(node(price=None)), 1800.0, P)
    assert (found.gpu_hours, found.cost, found.unpriced_gpu_hours) == (D("0.5"), D(0), D("0.5"))
    assert (found.team, found.pod, found.allocated_gpu_hours, found.allocated_cost) == ("", "", D(0), D(0))
    assert found.detail == {"reason": "throttle", "reasons": ["hw_slowdown"], "throttled_seconds": 450.0,
                            "power_violation_seconds": 12.5, "thermal_violation_seconds": 0.0, "holders": [],
                            "tags": ["throttle", "clock:hw_slowdown"], "sums": {}}


def test_unhealthy_holders_are_every_pod_naming_the_uuid_and_the_top_one_names_the_finding():
    # GPU-1 is held by a (0.5 GPU-hours, team x) and b (1.5, team y) on n1; the exporter reports it under its own pod
    # name as Hostname (no NODE_NAME): the GPU is matched by UUID, so the finding is on n1 with both holders.
    pods = [pod("a", team="x", allocated=0.5), pod("b", team="y", allocated=1.5), pod("c", team="z", node="n2")]
    facts = [series("p-a", "GPU-1"), series("p-b", "GPU-1"), series("p-c", "GPU-2")]
    [found] = rules.unhealthy([DeviceHealth("dcgm-exporter-x7k2p", "GPU-1", ecc_dbe=1.0)], [], [], pods, facts,
                              nodes(node(), node("n2")), HOUR, P)
    assert (found.subject, found.node) == ("n1/GPU-1/ecc", "n1")
    assert [h["pod"] for h in found.detail["holders"]] == ["p-a", "p-b"]
    assert (found.team, found.pod, found.allocated_gpu_hours, found.allocated_cost) == ("y", "p-b", D("2"), D("4"))


# (case, the exporter's Hostname label and the GPU's UUID, the exporter pods kube-state-metrics places, node found)
DEVICE_NODE_CASES = [
    ("a held GPU: its holder's node, whatever the Hostname", ("exporter-pod-1", "GPU-1"), {}, "n1"),
    ("an idle GPU on a node Kubernetes knows", ("n2", "GPU-9"), {}, "n2"),
    ("an idle GPU beside a held one of the same exporter", ("exporter-pod-1", "GPU-8"), {}, "n1"),
    ("an idle GPU of an exporter pod placed by kube_pod_info", ("exporter-pod-2", "GPU-7"),
     {"exporter-pod-2": "n2"}, "n2"),
    ("nothing says where: the Hostname as given", ("exporter-pod-3", "GPU-6"), {}, "exporter-pod-3"),
]


@pytest.mark.parametrize(("case", "seen", "exporters", "expected"), DEVICE_NODE_CASES,
                         ids=[c[0] for c in DEVICE_NODE_CASES])
def test_device_nodes_match_gpus_by_uuid_not_by_the_exporters_hostname(case, seen, exporters, expected):
    # p-u1 on n1 holds GPU-1, which exporter-pod-1 reports: so exporter-pod-1 serves n1.
    where = rules.DeviceNodes([pod()], [series("p-u1", "GPU-1")], nodes(node(), node("n2")),
                              [("exporter-pod-1", "GPU-1"), seen], exporters)
    assert where.node(*seen) == expected


# (case, the node the GPU vanished from, flagged?)
VANISHED_CASES = [
    ("its node was there the whole hour", node(), True),
    ("its node was there all but half a second", node(present=HOUR - 0.5), True),
    ("its node left during the hour", node(present=HOUR - 600), False),
    ("its node was unavailable", node(unavailable=True), False),
]


@pytest.mark.parametrize(("case", "fact", "flagged"), VANISHED_CASES, ids=[c[0] for c in VANISHED_CASES])
def test_vanished_gpu_counts_only_on_a_node_present_and_available(case, fact, flagged):
    gone = VanishedDevice("n1", "GPU-2", LAST_SEEN, namespace="ns", pod="p-u1")
    found = rules.unhealthy([], [gone], [], [pod()], [], nodes(fact), HOUR, P)
    assert [f.subject for f in found] == (["n1/GPU-2/vanished"] if flagged else [])
    still = rules.unhealthy([], [], [StillGone("n1", "GPU-2", ("ns", "p-u1"))], [pod()], [], nodes(fact), HOUR, P)
    assert [f.subject for f in still] == (["n1/GPU-2/vanished"] if flagged else [])


def test_vanished_gpu_on_an_unknown_node_is_not_flagged():
    gone = VanishedDevice("elsewhere", "GPU-2", LAST_SEEN)
    assert rules.unhealthy([], [gone], [StillGone("elsewhere", "GPU-3", ("", ""))], [], [], nodes(), HOUR, P) == []


def test_vanished_gpus_holder_is_its_last_pod_with_the_gpus_share_of_it():
    # p-u1 held 2 GPUs for the hour (2 GPU-hours, $4); GPU-2 vanished with its series: its share is 1 GPU-hour, $2.
    gone = VanishedDevice("n1", "GPU-2", LAST_SEEN, namespace="ns", pod="p-u1")
    [found] = rules.unhealthy([], [gone], [], [pod(gpus=2.0, allocated=2.0)], [], nodes(), HOUR, P)
    assert found.detail["last_seen"] == "2026-11-20T12:40:00+00:00"
    assert (found.pod, found.allocated_gpu_hours, found.allocated_cost) == ("p-u1", D("1"), D("2"))


def test_still_gone_gpu_without_a_holder_and_a_fresh_vanish_wins_over_it():
    still = [StillGone("n1", "GPU-3", ("", "")), StillGone("n1", "GPU-2", ("ns", "other"))]
    gone = VanishedDevice("n1", "GPU-2", LAST_SEEN, namespace="ns", pod="p-u1")
    found = rules.unhealthy([], [gone], still, [pod()], [], nodes(), HOUR, P)
    by_subject = {f.subject: f for f in found}
    assert sorted(by_subject) == ["n1/GPU-2/vanished", "n1/GPU-3/vanished"]
    assert by_subject["n1/GPU-2/vanished"].pod == "p-u1"  # the holder this hour's vanish named
    assert by_subject["n1/GPU-3/vanished"].detail == {"reason": "vanished", "holders": [], "tags": ["vanished"],
                                                      "sums": {}}


# ---- Activity on GPUs nobody holds ----

MIG_A100 = node(sharing=MIG_MIXED)
MIG_A30 = node(sharing=MIG_SINGLE, model=A30, slices=4)

# (case, device without a pod identity, the pods' series, node, expected (subject, GPU-hours) or None)
UNATTRIBUTED_CASES = [
    ("a busy GPU nobody holds", DeviceActivity("n1", "GPU-9", "", "", 0.5), [], node(), ("n1/GPU-9", D("1"))),
    ("at the threshold is not flagged", DeviceActivity("n1", "GPU-9", "", "", 0.05), [], node(), None),
    ("just above it", DeviceActivity("n1", "GPU-9", "", "", 0.06), [], node(), ("n1/GPU-9", D("1"))),
    ("a held GPU's unlabelled series", DeviceActivity("n1", "GPU-1", "", "", 0.5), [series("p-u1", "GPU-1")],
     node(), None),
    ("a GPU one of whose instances is held", DeviceActivity("n1", "GPU-1", "", "", 0.5),
     [series("p-u1", "GPU-1", gi="1")], node(), None),
    ("a MIG GPU's own series: its instances are judged", DeviceActivity("n1", "GPU-9", "", "", 0.5), [],
     MIG_A100, None),
    ("an A100 3g instance is 3/7 of a GPU", DeviceActivity("n1", "GPU-9", "2", "3g.40gb", 0.5), [], MIG_A100,
     ("n1/GPU-9/2", D("0.428571429"))),
    ("an A30 1g instance is 1/4 of a GPU", DeviceActivity("n1", "GPU-9", "3", "1g.6gb", 0.5), [], MIG_A30,
     ("n1/GPU-9/3", D("0.25"))),
    ("another instance of a held GPU", DeviceActivity("n1", "GPU-1", "2", "1g.10gb", 0.5),
     [series("p-u1", "GPU-1", gi="1")], MIG_A100, ("n1/GPU-1/2", D("0.142857143"))),
    ("the held instance itself", DeviceActivity("n1", "GPU-1", "1", "1g.10gb", 0.5),
     [series("p-u1", "GPU-1", gi="1")], MIG_A100, None),
    ("an instance with a profile naming no slices counts a whole GPU",
     DeviceActivity("n1", "GPU-9", "2", "weird", 0.5), [], MIG_A100, ("n1/GPU-9/2", D("1"))),
]


@pytest.mark.parametrize(("case", "device", "facts", "fact", "expected"), UNATTRIBUTED_CASES,
                         ids=[c[0] for c in UNATTRIBUTED_CASES])
def test_unattributed(case, device, facts, fact, expected):
    found = rules.unattributed([device], [pod(working=0.5, idle=0.5)], facts, nodes(fact), HOUR, P)
    assert [(f.subject, f.gpu_hours) for f in found] == ([expected] if expected else [])
    assert all(f.kind == Kind.UNATTRIBUTED_ACTIVITY for f in found)


def test_unattributed_is_not_judged_on_a_node_with_an_unmeasured_holder():
    # An unmeasured hold on n1 may be the unlabelled series' owner: an attribution gap (coverage), not a finding.
    device = DeviceActivity("n1", "GPU-9", "", "", 0.5)
    assert rules.unattributed([device], [pod(unmeasured=1e-6)], [], nodes(), HOUR, P) == []
    assert len(rules.unattributed([device], [pod(unmeasured=1e-10)], [], nodes(), HOUR, P)) == 1  # float noise


def test_unattributed_figures_priced_at_the_node_and_unpriced_off_any_node():
    # A 3g instance (3/7 GPU) at 0.7 for the hour on a $2 node: 0.428571429 GPU-hours, $0.857143, 0.3 working.
    [found] = rules.unattributed([DeviceActivity("n1", "GPU-9", "2", "3g.40gb", 0.7)], [], [], nodes(MIG_A100),
                                 HOUR, P)
    assert (found.cost, found.unpriced_gpu_hours, found.node, found.gpu_uuid) == (D("0.857143"), D(0), "n1", "GPU-9")
    assert found.detail == {"activity": 0.7, "working_gpu_hours": 0.3, "share": 0.428571, "profile": "3g.40gb",
                            "node_group": "g", "gpu_model": A100}
    # On a node the bucket does not know: a whole GPU, no price, no node group.
    [off] = rules.unattributed([DeviceActivity("ghost", "GPU-9", "", "", 0.5)], [], [], nodes(), 1800.0, P)
    assert (off.gpu_hours, off.cost, off.unpriced_gpu_hours) == (D("0.5"), D(0), D("0.5"))
    assert off.detail == {"activity": 0.5, "working_gpu_hours": 0.25, "share": 1.0}


# ---- Missing signals ----

# (case, pods, series count, signals those series had, expected reason or None)
MISSING_CASES = [
    ("no DCGM series at all", [pod(idle=0.0, unmeasured=1.0)], 0, set(), "no DCGM series"),
    ("series without the signal", [pod(idle=0.0, unmeasured=1.0)], 3, {"gpu_util"},
     "DCGM series without DCGM_FI_PROF_SM_ACTIVE"),
    ("series with the signal", [pod(idle=0.0, unmeasured=1.0)], 3, {"sm_active"}, None),
    ("a pod measured under it: the signal was there", [pod(idle=0.0, unmeasured=1.0), pod("u2")], 0, set(), None),
    ("nobody held GPUs", [], 0, set(), None),
    ("holders with nothing unmeasured", [pod(idle=0.0, allocated=0.0)], 0, set(), None),
]


@pytest.mark.parametrize(("case", "pods", "count", "signals", "reason"), MISSING_CASES,
                         ids=[c[0] for c in MISSING_CASES])
def test_missing_signal(case, pods, count, signals, reason):
    found = rules.missing_signal(pods, count, signals, "sm_active", "DCGM_FI_PROF_SM_ACTIVE")
    assert [f.detail["reason"] for f in found] == ([reason] if reason else [])


def test_missing_signal_figures_are_the_unmeasured_hours():
    # u1: 1 GPU-hour unmeasured at $2; u2: 0.5 unmeasured of 0.75 allocated, unpriced.
    pods = [pod(idle=0.0, unmeasured=1.0), pod("u2", idle=0.0, allocated=0.75, unmeasured=0.5, price=None)]
    [found] = rules.missing_signal(pods, 2, {"gpu_util"}, "sm_active", "DCGM_FI_PROF_SM_ACTIVE")
    assert (found.kind, found.subject, found.gpu_hours, found.cost, found.unpriced_gpu_hours) == (
        Kind.MISSING_SIGNAL, "sm_active", D("1.5"), D("2"), D("0.5"))
    assert (found.allocated_gpu_hours, found.allocated_cost) == (D("1.75"), D("2"))
    fix = metrics_fix("DCGM_FI_PROF_SM_ACTIVE")  # the metrics-list line the exporter's configuration lacks
    assert found.detail == {"signal": "sm_active", "metric": "DCGM_FI_PROF_SM_ACTIVE",
                            "reason": "DCGM series without DCGM_FI_PROF_SM_ACTIVE", "fix": str(fix), "line": fix.line}
    assert fix.line.startswith("DCGM_FI_PROF_SM_ACTIVE, gauge")
    [none] = rules.missing_signal(pods, 0, set(), "sm_active", "DCGM_FI_PROF_SM_ACTIVE")
    assert none.detail["fix"] == "deploy dcgm-exporter with pod labels"
    assert "line" not in none.detail


# ---- Rejected team labels ----


def test_team_label_rejected():
    pods = [pod("u1", team="platform", allocated=0.5), pod("u2", team="vision", price=None)]
    rejected = [("u2", "Vision!", "invalid"), ("u1", "x" * 150, "enforced"), ("u1", "x" * 150, "enforced"),
                ("gone", "nlp", "invalid")]  # a repeat counts once; a pod the bucket does not hold is no finding
    found = rules.team_label_rejected(rejected, pods)
    assert [(f.subject, f.team, f.detail["reason"]) for f in found] == [("u1", "platform", "enforced"),
                                                                       ("u2", "vision", "invalid")]
    first, second = found
    assert first.detail == {"label": "x" * 100, "reason": "enforced", "charged_to": "platform"}  # cut to 100
    assert (first.gpu_hours, first.cost, first.allocated_gpu_hours, first.allocated_cost) == (
        D("0.5"), D("1"), D("0.5"), D("1"))
    assert (second.cost, second.unpriced_gpu_hours) == (D(0), D("1"))


# ---- Zero-allocatable nodes ----


def test_zero_allocatable():
    figures = [
        NodeHourFigures("n2", "g", A100, 8, 8.0, D("2")),  # shown once of twelve snapshots, 8 GPU-hours lost: $16
        NodeHourFigures("n1", "g", A100, 8, 2.5, None),  # unpriced
        NodeHourFigures("n3", "g", A100, 8, 0.0, D("2")),  # flagged but no unavailable hours in the ledger
        NodeHourFigures("n4", "g", A100, 8, 8.0, D("2")),  # unavailable but no snapshot showed zero allocatable
    ]
    found = rules.zero_allocatable({"n1": (12, 12), "n2": (1, 12), "n3": (12, 12)}, figures)
    assert [(f.kind, f.subject, f.gpu_hours, f.cost, f.unpriced_gpu_hours) for f in found] == [
        (Kind.ZERO_ALLOCATABLE_NODE, "n1", D("2.5"), D(0), D("2.5")),
        (Kind.ZERO_ALLOCATABLE_NODE, "n2", D("8"), D("16"), D(0)),
    ]
    assert found[1].detail == {"node_group": "g", "gpu_model": A100, "physical_gpus": 8, "snapshots": 1,
                               "snapshots_in_hour": 12}
