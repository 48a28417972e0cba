"""The reconciliation (apps/billing/selectors.py, `/api/v1/reconciliation/`, `/reconciliation/`): the real FOCUS
sample imported over a ledger whose nodes carry some of its resource ids; every figure computed by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from apps.billing.selectors import reconciliation
from apps.billing.services import import_bill
from apps.inventory.models import Cluster
from tests.billing.helpers import N, sync_nodes, write_hour
from tests.billing.test_import import SAMPLE_NODES
from tests.fixtures.focus_bills import SAMPLE_1_0

pytestmark = pytest.mark.django_db

NODES = {n.name: n for n in SAMPLE_NODES}
G5_SMALL = N("g5-b", NODES["g5-b"].provider_id, gpus=4)


@pytest.fixture
def billed():
    """Ledger: 2024-09-24 02:00 g3-a and idle-d (8 GPUs each), 2024-09-21 01:00 g5-b (4 GPUs), all at 2.50 per
    GPU-hour: price-card capacity cost 20.00, 20.00 and 10.00. Then the sample bill is imported over it."""
    cluster = Cluster.objects.create(name="prod")
    sync_nodes(cluster, [*SAMPLE_NODES[:1], G5_SMALL, *SAMPLE_NODES[2:]], datetime(2024, 9, 1, tzinfo=UTC))
    write_hour(cluster, datetime(2024, 9, 24, 2, tzinfo=UTC), [NODES["g3-a"], NODES["idle-d"]])
    write_hour(cluster, datetime(2024, 9, 21, 1, tzinfo=UTC), [G5_SMALL])
    import_bill(SAMPLE_1_0.encode(), "focus_sample.csv")
    return cluster


def _nodes(result) -> dict[str, tuple]:
    return {n.node: (n.price_card_cost, n.billed_cost, n.variance) for c in result.clusters for n in c.nodes}


def test_effective_cost_basis_by_hand(billed):
    result = reconciliation("2024-09")
    assert result.basis == "EffectiveCost" and result.bill_lines == 7
    assert _nodes(result) == {
        "g3-a": (Decimal("20.000000"), Decimal("1.000000"), Decimal("-19.000000")),
        "g5-b": (Decimal("10.000000"), Decimal("0E-6"), Decimal("-10.000000")),
        "idle-d": (Decimal("20.000000"), None, None),  # a GPU node with no bill line
        "oci-c": (Decimal(0), Decimal("0E-6"), Decimal("0E-6")),  # billed, not in the ledger then
        "aks-0": (Decimal(0), Decimal("0E-6"), Decimal("0E-6")),
        "aks-1": (Decimal(0), Decimal("0E-6"), Decimal("0E-6")),
    }
    (prod,) = result.clusters
    assert (prod.price_card_cost, prod.billed_cost, prod.variance) == (
        Decimal("50.000000"), Decimal("1.000000"), Decimal("-49.000000"))
    assert prod.variance_share == -0.98
    assert [n.node for n in prod.nodes_without_bill] == ["idle-d"]
    # Rows 4, 6, 7: g5/g3 instance-hours of instances no node has; EffectiveCost 2 + 1 + 1.
    assert [(u.row, u.resource_id) for u in result.unmatched] == [
        (6, "i-02619lael51119a85"), (4, "i-006flle71l19b488a"), (7, "i-035fel2la90287a83")]
    assert result.unmatched_cost == Decimal("4.0000000000")


def test_billed_cost_basis_is_a_setting(billed, settings):
    settings.GPUFINOPS_BILL_COST = "BilledCost"
    result = reconciliation("2024-09")
    (prod,) = result.clusters
    # 1.14 (g3-a) + 0.480884 (g5-b, 0.480884264 to the micro-dollar) + 0.24 (oci-c) + 0 (the scale set's day)
    assert prod.billed_cost == Decimal("1.860884")
    assert prod.variance == Decimal("-48.139116")
    assert _nodes(result)["g3-a"] == (Decimal("20.000000"), Decimal("1.140000"), Decimal("-18.860000"))
    assert result.unmatched_cost == Decimal("1.624") + Decimal("1.110635736") + Decimal("0.78280038")


def test_a_month_without_a_bill_lists_every_node_as_without_bill_line(billed):
    result = reconciliation("2024-10")
    assert result.bill_lines == 0 and result.clusters == () and result.unmatched == ()
    with pytest.raises(ValueError, match="not a month"):
        reconciliation("2024-13")


def test_the_api_and_the_page_are_finance_only_and_say_the_same(billed):
    finance = User.objects.create_user("fin")
    finance.groups.add(Group.objects.create(name="finance"))
    lead = User.objects.create_user("lead")
    api = APIClient()
    api.force_authenticate(lead)
    assert api.get("/api/v1/reconciliation/", {"month": "2024-09"}).status_code == 403
    api.force_authenticate(finance)
    assert api.get("/api/v1/reconciliation/", {"month": "September"}).status_code == 400
    body = api.get("/api/v1/reconciliation/").json()  # default: the latest month the bill has
    assert body["month"] == "2024-09" and body["basis"] == "EffectiveCost"
    (prod,) = body["clusters"]
    assert [Decimal(str(prod[k])) for k in ("price_card_cost", "billed_cost", "variance")] == [
        Decimal(50), Decimal(1), Decimal(-49)]
    assert prod["nodes_without_bill"] == ["idle-d"] and Decimal(str(body["unmatched_cost"])) == Decimal(4)
    assert [u["row"] for u in body["unmatched_lines"]] == [6, 4, 7]
    assert body["imports"][0]["name"] == "focus_sample.csv"
    page = APIClient()
    page.force_login(lead)
    assert page.get("/reconciliation/").status_code == 403
    page.force_login(finance)
    html = page.get("/reconciliation/?month=2024-09").content.decode()
    for text in ("$50.00", "$1.00", "-$49.00", "no bill line", "i-006flle71l19b488a", "no node has this providerID"):
        assert text in html, text
