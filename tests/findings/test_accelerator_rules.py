"""Table tests of the finding rules about GPUs handed out by DRA claims and HAMi fractions
(`apps/findings/accelerator_rules.py`), and of the kinds a DRA or HAMi node never gets (`rules.unattributed`)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.findings import accelerator_rules as acc
from apps.findings import rules
from apps.findings.constants import Kind
from apps.inventory import gpus
from apps.usage.ledger import NodeFact
from apps.usage.sources import DeviceActivity

H100 = "NVIDIA-H100-80GB-HBM3"
PRICE = Decimal("4.00")
G0, G1 = "GPU-00000000-0000-0000-0000-000000000000", "GPU-11111111-1111-1111-1111-111111111111"
MIG0 = "MIG-00000000-0000-0000-0000-000000000000"


def decimals(rows: list[tuple[str, ...]]) -> list[tuple[object, ...]]:
    """The expected rows with their figures (digits) as exact decimals: the subject and pod stay text."""
    return [tuple(Decimal(v) if v[:1].isdigit() else v for v in row) for row in rows]


def node(name: str, sharing: str, price: Decimal | None = PRICE) -> NodeFact:
    return NodeFact(name, f"{sharing}-pool", gpus.GpuNode(H100, 8, sharing, 7), 3600.0, False, price)


def hold(claim: str = "reserved", hours: float = 2.0, price: Decimal | None = PRICE, **kw: object) -> acc.ClaimHold:
    fields: dict = {"namespace": "platform", "claim": claim, "team": "platform", "node": "dra-0", "node_group": "dra",
                    "gpu_model": H100, "devices": (("gpu-0", G0), ("gpu-1", G1)), "gpu_uuid": G0,
                    "idle_gpu_hours": hours, "price": price}
    fields.update(kw)
    return acc.ClaimHold(**fields)


# ---- idle_claim ----


@pytest.mark.parametrize(
    ("holds", "expected"),
    [
        # two devices held the whole hour with no consumer: 2 GPU-hours at $4
        ([hold()], [("platform/reserved", "2.000000000", "8.000000", "0.000000000")]),
        # a consumer ran for half the hour: half the hold is idle
        ([hold(hours=1.0)], [("platform/reserved", "1.000000000", "4.000000", "0.000000000")]),
        # held, but a consumer ran all the time: nothing idle, no finding
        ([hold(hours=0.0)], []),
        # a MIG device 3g of 7 for the whole hour, on a model without a price: unpriced, not $0
        ([hold("mig", hours=3 / 7, price=None, devices=(("gpu-0-mig-3g40gb-2-0", MIG0),))],
         [("platform/mig", "0.428571429", "0", "0.428571429")]),
        # two claims, sorted by namespace and name
        ([hold("b"), hold("a", hours=0.5)], [("platform/a", "0.500000000", "2.000000", "0.000000000"),
                                              ("platform/b", "2.000000000", "8.000000", "0.000000000")]),
    ],
)
def test_idle_claims(holds: list[acc.ClaimHold], expected: list[tuple[str, str, str, str]]) -> None:
    found = acc.idle_claims(holds)
    assert [(f.subject, f.gpu_hours, f.cost, f.unpriced_gpu_hours) for f in found] == decimals(expected)
    for f in found:
        assert f.kind == Kind.IDLE_CLAIM and f.workload == f"ResourceClaim/{f.subject.split('/')[1]}"
        assert (f.team, f.namespace, f.pod) == ("platform", "platform", "")
        assert f.allocated_gpu_hours == f.gpu_hours and f.allocated_cost == f.cost


def test_an_idle_claim_names_its_devices_and_first_gpu() -> None:
    [f] = acc.idle_claims([hold()])
    assert (f.node, f.gpu_uuid) == ("dra-0", G0)
    assert f.detail["devices"] == [{"name": "gpu-0", "uuid": G0}, {"name": "gpu-1", "uuid": G1}]
    assert f.detail["claim"] == "reserved" and f.detail["idle_gpu_hours"] == 2.0


# ---- oversubscribed_gpu ----


def tenant(pod: str, hours: float, team: str = "serving") -> acc.Tenant:
    return acc.Tenant(team, "serving", f"Deployment/{pod}", pod, hours, PRICE)


def over(seconds: float, peak: float, *tenants: acc.Tenant, uuid: str = G0) -> acc.Oversubscription:
    return acc.Oversubscription("hami-0", "hami", H100, uuid, seconds, peak, tuple(tenants), PRICE)


@pytest.mark.parametrize(
    ("gpus_", "expected"),
    [
        # three tenants at 50 % cores the whole hour: S = 1.5, each scaled to 1/3 of the GPU (each tenant's
        # figures are exact to 1e-9 GPU-hours and the micro-dollar, as their pod rows are: 3 x 0.333333333)
        ([over(3600, 1.5, tenant("a", 1 / 3), tenant("b", 1 / 3), tenant("c", 1 / 3))],
         [("hami-0/" + G0, "1.000000000", "4.000000", "0.999999999", "3.999999", "a")]),
        # oversubscribed for 15 minutes only: a quarter of a GPU-hour; the biggest tenant is named
        ([over(900, 1.2, tenant("a", 0.6), tenant("b", 0.4))],
         [("hami-0/" + G0, "0.250000000", "1.000000", "1.000000000", "4.000000", "a")]),
        # shares that never add past 1: no finding
        ([over(0, 0.9, tenant("a", 0.5), tenant("b", 0.4))], []),
    ],
)
def test_oversubscribed(gpus_: list[acc.Oversubscription], expected: list[tuple[str, ...]]) -> None:
    found = acc.oversubscribed(gpus_)
    got = [(f.subject, f.gpu_hours, f.cost, f.allocated_gpu_hours, f.allocated_cost, f.pod) for f in found]
    assert got == decimals(expected)
    for f in found:
        assert f.kind == Kind.OVERSUBSCRIBED_GPU and (f.node, f.gpu_uuid) == ("hami-0", G0) and f.team == "serving"


def test_an_oversubscribed_gpu_lists_its_tenants_and_the_largest_share_sum() -> None:
    [f] = acc.oversubscribed([over(3600, 1.5, tenant("a", 0.5), tenant("b", 0.25, team="research"))])
    assert f.detail["max_share_sum"] == 1.5 and f.detail["oversubscribed_seconds"] == 3600
    assert [(t["team"], t["pod"], t["gpu_hours"]) for t in f.detail["tenants"]] == [
        ("research", "b", 0.25), ("serving", "a", 0.5)]
    # the run's holder is kept from these sums (services._holder_identity), as for unhealthy GPUs
    assert f.detail["sums"] == {"holder:research|serving|Deployment/b|b": "0.250000000",
                                "holder:serving|serving|Deployment/a|a": "0.500000000"}


# ---- missing_attribution ----

NODES = {"dra-0": node("dra-0", gpus.DRA_CLAIMS), "dra-1": node("dra-1", gpus.DRA_CLAIMS, price=None)}


@pytest.mark.parametrize(
    ("units", "reporting", "expected"),
    [
        # two whole GPUs held through claims, unmeasured, their devices report series without a pod
        ([acc.ClaimUnit("dra-0", G0, G0, 1.0), acc.ClaimUnit("dra-0", G1, G1, 0.5)], {G0, G1},
         [("dra-0", "1.500000000", "6.000000", "0.000000000")]),
        # a MIG device: its series are the MIG device's (newer exporters) or the parent GPU's (older)
        ([acc.ClaimUnit("dra-0", G0, MIG0, 3 / 7)], {MIG0}, [("dra-0", "0.428571429", "1.714286", "0.000000000")]),
        ([acc.ClaimUnit("dra-0", G0, MIG0, 3 / 7)], {G0}, [("dra-0", "0.428571429", "1.714286", "0.000000000")]),
        # the device reports nothing at all: a missing signal or a vanished GPU, not an attribution gap
        ([acc.ClaimUnit("dra-0", G0, G0, 1.0)], set(), []),
        # measured units (nothing unmeasured): no finding
        ([acc.ClaimUnit("dra-0", G0, G0, 0.0)], {G0}, []),
        # one finding per node, a node without a price unpriced
        ([acc.ClaimUnit("dra-1", G1, G1, 1.0), acc.ClaimUnit("dra-0", G0, G0, 1.0)], {G0, G1},
         [("dra-0", "1.000000000", "4.000000", "0.000000000"), ("dra-1", "1.000000000", "0", "1.000000000")]),
    ],
)
def test_missing_attribution(units: list[acc.ClaimUnit], reporting: set[str],
                             expected: list[tuple[str, str, str, str]]) -> None:
    found = acc.missing_attribution(units, reporting, NODES, "gpu.nvidia.com")
    assert [(f.subject, f.gpu_hours, f.cost, f.unpriced_gpu_hours) for f in found] == decimals(expected)
    for f in found:
        assert f.kind == Kind.MISSING_ATTRIBUTION and f.team == "" and f.node == f.subject


def test_missing_attribution_says_how_to_turn_it_on() -> None:
    [f] = acc.missing_attribution([acc.ClaimUnit("dra-0", G0, G0, 1.0)], {G0}, NODES, "gpu.nvidia.com")
    assert "KUBERNETES_ENABLE_DRA=true" in f.detail["fix"] and "resourceslices" in f.detail["fix"]
    assert (f.detail["driver"], f.detail["devices"], f.detail["node_group"]) == ("gpu.nvidia.com", 1, "dra-pool")


# ---- what a DRA or HAMi node never gets ----


@pytest.mark.parametrize(
    ("sharing", "flagged"),
    [(gpus.WHOLE, True), (gpus.TIME_SLICING, True), (gpus.DRA_CLAIMS, False), (gpus.HAMI_FRACTIONS, False)],
)
def test_unattributed_activity_is_never_found_on_dra_or_hami_gpus(sharing: str, flagged: bool) -> None:
    busy = [DeviceActivity("n0", G0, "", "", 0.8)]
    found = rules.unattributed(busy, [], [], {"n0": node("n0", sharing)}, 3600.0, rules.Params())
    assert [f.subject for f in found] == (["n0/" + G0] if flagged else [])


@pytest.mark.parametrize("sharing", [gpus.DRA_CLAIMS, gpus.HAMI_FRACTIONS])
def test_a_dra_or_hami_node_is_never_zero_allocatable(sharing: str) -> None:
    assert not gpus.is_zero_allocatable({}, sharing)
    assert gpus.is_zero_allocatable({}, gpus.WHOLE)
