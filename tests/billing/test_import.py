"""Importing a FOCUS bill (apps/billing): the FinOps Foundation's real 1.0 sample matched to nodes whose providerIDs
are some of its resource ids, per-provider rules, spreading over node-hours, re-import, refusal of a broken file.
Figures are computed by hand in the comments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.billing.focusfile import BillFileError, read_bill
from apps.billing.models import BilledNodeHour, BillImport, BillLine
from apps.billing.services import import_bill
from apps.inventory.models import Cluster
from tests.billing.helpers import N, sync_nodes, write_hour
from tests.fixtures.focus_bills import HEADER_1_3, SAMPLE_1_0

pytestmark = pytest.mark.django_db

SEEN = datetime(2024, 9, 1, tzinfo=UTC)
AKS = ("azure:///subscriptions/9ec51cfd-5ca7-4d76-8101-dd0a4abc5674/resourceGroups/mc_analyticsengine_analyticsengine"
       "_eastus/providers/Microsoft.Compute/virtualMachineScaleSets/aks-secretagent-37798712-vmss/virtualMachines/")
SAMPLE_NODES = [
    N("g3-a", "aws:///us-east-1d/i-0b3b3095474a3772a"),  # row 3: g3.4xlarge, 2024-09-24 02:00, Effective 1, Billed 1.14
    N("g5-b", "aws:///us-east-1a/i-09ba12e1l5743720b"),  # row 5: g5 0.296111 h, Effective 0, Billed 0.480884264
    N("oci-c", "oci://ocid6.instance.oc6.phx.anyhqljrdsqlhbicxkrxepiwynwfigxnvbzvimunzi1jtgqxhq2skchut8uq"),  # row 10
    N("aks-0", AKS + "0"), N("aks-1", AKS + "1"),  # row 15: the scale set's daily row, shared by its two nodes
    N("idle-d", "aws:///us-east-1a/i-0000000000000dead"),  # on no line of the bill
]


def _hours(cluster: Cluster) -> dict[tuple[str, str], tuple[Decimal, Decimal]]:
    out: dict[tuple[str, str], tuple[Decimal, Decimal]] = {}
    for row in BilledNodeHour.objects.filter(cluster=cluster):
        key = (row.node, f"{row.hour:%Y-%m-%dT%H}")
        e, b = out.get(key, (Decimal(0), Decimal(0)))
        out[key] = (e + row.effective_cost, b + row.billed_cost)
    return out


@pytest.fixture
def prod():
    cluster = Cluster.objects.create(name="prod")
    sync_nodes(cluster, SAMPLE_NODES, SEEN)
    return cluster


def test_the_real_sample_keeps_the_gpu_nodes_lines_matched_by_provider(prod):
    result = import_bill(SAMPLE_1_0.encode(), "focus_sample.csv")
    bill = result.bill
    assert result.created and bill.focus_version == "1.0" and bill.rows_read == 15
    lines = {line.row: line for line in BillLine.objects.filter(bill=bill)}
    # Kept: the usage rows of our nodes (3 AWS, 5 AWS, 10 Oracle, 15 Azure scale set) and the GPU machines
    # (g5/g3 instance-hours) of nodes we do not know (4, 6, 7). Not kept: t2/t3 instances (1, 2), the Credit (8),
    # another Oracle instance's memory (9), Adjustments even on our node's OCID (11, 12), the AKS control plane (13),
    # the Azure ML workspace (14).
    assert sorted(lines) == [3, 4, 5, 6, 7, 10, 15]
    assert {r: line.match for r, line in lines.items()} == {
        3: "resource_id", 5: "resource_id", 10: "resource_id", 15: "scale_set", 4: "none", 6: "none", 7: "none"}
    assert lines[3].nodes == ["g3-a"] and lines[15].nodes == ["aks-0", "aks-1"]
    assert lines[4].cluster_id is None and lines[4].note == "no node has this providerID"
    assert bill.lines_kept == 7 and bill.lines_matched == 4
    hours = _hours(prod)
    # One hour each, none of the nodes in the ledger: the whole line on its hour.
    assert hours[("g3-a", "2024-09-24T02")] == (Decimal("1.000000"), Decimal("1.140000"))
    assert hours[("g5-b", "2024-09-21T01")] == (Decimal("0"), Decimal("0.480884"))  # 0.480884264 to the micro-dollar
    assert hours[("oci-c", "2024-09-30T22")] == (Decimal("0"), Decimal("0.240000"))
    # The scale set's day (0.0000003702) over 24 hours x 2 nodes: 48 node-hours of 0.000000.
    aks = {k: v for k, v in hours.items() if k[0].startswith("aks-")}
    assert len(aks) == 48 and set(aks.values()) == {(Decimal(0), Decimal(0))}
    assert not any(node == "idle-d" for node, _ in hours)


def test_a_line_is_spread_over_the_hours_its_node_was_in_the_ledger_never_over_24(prod):
    """A daily Azure row for VM `<scale set>_3` of 60.00: the node was in the ledger 20 hours of that day, so each of
    them carries 60 / 20 = 3.000000 (never 60 / 24 = 2.50)."""
    vmss = ("/subscriptions/s1/resourcegroups/mc_rg/providers/microsoft.compute/virtualmachinescalesets/"
            "aks-gpu-12345678-vmss")
    node = N("aks-gpu-3", "azure:///subscriptions/s1/resourceGroups/MC_rg/providers/Microsoft.Compute/"
             "virtualMachineScaleSets/aks-gpu-12345678-vmss/virtualMachines/3")
    sync_nodes(prod, [node], SEEN)
    day = datetime(2024, 9, 10, tzinfo=UTC)
    for h in range(4, 24):
        write_hour(prod, day + timedelta(hours=h), [node])
    row = _row13(ChargePeriodStart="2024-09-10T00:00:00Z", ChargePeriodEnd="2024-09-11T00:00:00Z",
                 ProviderName="Microsoft", ServiceProviderName="Microsoft", ResourceId=vmss,
                 ResourceName="aks-gpu-12345678-vmss_3", EffectiveCost="60.00", BilledCost="72.00",
                 PricingQuantity="20", PricingUnit="Hours")
    bill = import_bill(_file13([row]), "azure-day.csv").bill
    assert bill.focus_version == "1.3"
    hours = _hours(prod)
    assert sorted(hours) == [("aks-gpu-3", f"2024-09-10T{h:02d}") for h in range(4, 24)]
    assert set(hours.values()) == {(Decimal("3.000000"), Decimal("3.600000"))}


def test_aggregated_lines_fall_back_to_node_pool_tags_weighted_by_capacity(prod):
    """An EKS node group's hour without a resource id, 10.00: its nodes hold 8 and 4 GPUs in the ledger, so
    10 x 8/12 = 6.666667 and 10 x 4/12 = 3.333333 (the micro-dollar left over goes to the larger remainder)."""
    pool = (("eks.amazonaws.com/nodegroup", "gpu-a"),)
    big, small = N("eks-big", "", gpus=8, labels=pool), N("eks-small", "", gpus=4, labels=pool)
    other = Cluster.objects.create(name="staging")
    sync_nodes(prod, [big, small], SEEN)
    sync_nodes(other, [N("eks-elsewhere", "", labels=pool)], SEEN)  # the same pool name in another cluster
    hour = datetime(2024, 9, 12, 7, tzinfo=UTC)
    write_hour(prod, hour, [big, small])
    tags = '{"eks:cluster-name": "prod", "eks:nodegroup-name": "gpu-a"}'
    ambiguous = '{"eks:nodegroup-name": "gpu-a"}'
    when = {"ChargePeriodStart": "2024-09-12T07:00:00Z", "ChargePeriodEnd": "2024-09-12T08:00:00Z"}
    rows = [
        _row13(ResourceId="", ResourceName="", Tags=tags, EffectiveCost="10.00", BilledCost="10.00", **when),
        _row13(ResourceId="", ResourceName="", Tags=ambiguous, EffectiveCost="4.00", BilledCost="4.00", **when),
    ]
    bill = import_bill(_file13(rows), "eks-aggregated.csv").bill
    lines = {line.row: line for line in bill.lines.all()}
    assert lines[1].match == "node_pool" and lines[1].nodes == ["eks-big", "eks-small"]
    assert _hours(prod) == {("eks-big", "2024-09-12T07"): (Decimal("6.666667"), Decimal("6.666667")),
                            ("eks-small", "2024-09-12T07"): (Decimal("3.333333"), Decimal("3.333333"))}
    # The untagged cluster leaves the pool in two clusters: matched to none, kept and reported (a GPU machine).
    assert lines[2].match == "none" and "several clusters" in lines[2].note


def test_re_importing_the_same_file_changes_nothing(prod):
    first = import_bill(SAMPLE_1_0.encode(), "focus_sample.csv")
    before = list(BilledNodeHour.objects.order_by("id").values_list("id", "effective_cost", "billed_cost"))
    again = import_bill(SAMPLE_1_0.encode(), "renamed.csv")
    assert not again.created and again.bill.pk == first.bill.pk
    assert BillImport.objects.count() == 1 and BillLine.objects.count() == 7
    assert list(BilledNodeHour.objects.order_by("id").values_list("id", "effective_cost", "billed_cost")) == before


def test_a_newer_file_for_the_same_account_and_period_replaces_the_older_lines(prod):
    node = N("p5-x", "aws:///us-west-2a/i-0abc")
    sync_nodes(prod, [node], SEEN)
    old = import_bill(_file13([_row13(EffectiveCost="90.00")]), "may-v1.csv").bill
    new = import_bill(_file13([_row13(EffectiveCost="98.50")]), "may-v2.csv").bill
    assert new.lines_replaced == 1 and not BillLine.objects.filter(bill=old).exists()
    assert _hours(prod) == {("p5-x", "2026-05-01T02"): (Decimal("98.500000"), Decimal("0.096000"))}


@pytest.mark.parametrize(("column", "value", "message"), [
    ("EffectiveCost", "1,50", "'1,50' is not a number"),
    ("ChargePeriodStart", "yesterday", "'yesterday' is not an ISO 8601 time"),
    ("BilledCost", "NaN", "NaN is not a finite number"),
    ("ChargeCategory", "", "a charge category is required"),
])
def test_a_broken_file_is_refused_whole_naming_row_and_column(prod, column, value, message):
    rows = [_row13(), _row13(ResourceId="arn:aws:ec2:us-west-2:1:instance/i-0abc", **{column: value}), _row13()]
    sync_nodes(prod, [N("p5-x", "aws:///us-west-2a/i-0abc")], SEEN)
    with pytest.raises(BillFileError) as caught:
        import_bill(_file13(rows), "broken.csv")
    assert (caught.value.row, caught.value.column) == (2, column)
    assert str(caught.value) == f"row 2, column {column}: {message}"
    assert not BillImport.objects.exists() and not BillLine.objects.exists() and not BilledNodeHour.objects.exists()


def test_the_command_imports_refuses_and_says_so(prod, tmp_path):
    good, bad = tmp_path / "sample.csv", tmp_path / "bad.csv"
    good.write_text(SAMPLE_1_0)
    bad.write_text(SAMPLE_1_0.replace('"2024-09-24 03:00:00","2024-09-24 02:00:00"', '"2024-09-24 03:00:00","x"'))
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 file"):
        call_command("import_bill", str(bad), str(good), stdout=out, stderr=err)
    assert "bad.csv: refused, nothing imported: row 3, column ChargePeriodStart: 'x' is not an ISO 8601 time" in (
        err.getvalue())
    assert "15 rows read, 7 GPU node lines kept (4 matched to nodes)" in out.getvalue()
    call_command("import_bill", str(good), stdout=out)
    assert "imported before" in out.getvalue() and BillLine.objects.count() == 7


def test_parquet_and_gzip_read_like_csv():
    import gzip

    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pacsv.read_csv(pa.BufferReader(SAMPLE_1_0.encode()),
                           convert_options=pacsv.ConvertOptions(null_values=["NULL"]))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    from_parquet = read_bill(sink.getvalue().to_pybytes())
    from_csv = read_bill(SAMPLE_1_0.encode())
    assert read_bill(gzip.compress(SAMPLE_1_0.encode())) == from_csv
    key = [(r.row, r.resource_id, r.charge_category, r.charge_period_start) for r in from_csv.rows]
    assert [(r.row, r.resource_id, r.charge_category, r.charge_period_start) for r in from_parquet.rows] == key
    assert [r.billed_cost for r in from_parquet.rows] == [r.billed_cost for r in from_csv.rows]


def test_a_file_that_is_not_focus_is_refused():
    with pytest.raises(BillFileError, match="no column BilledCost"):
        read_bill(b"identity/LineItemId,lineItem/UnblendedCost\nx,1\n")
    with pytest.raises(BillFileError, match="the file is empty"):
        read_bill(b"")


# ---- A FOCUS 1.3 file written row by row (HEADER_1_3's 65 columns) ----

BASE_1_3 = {
    "ProviderName": "AWS", "ServiceProviderName": "AWS", "BillingAccountId": "100000000001",
    "BillingPeriodStart": "2026-05-01T00:00:00Z", "BillingPeriodEnd": "2026-06-01T00:00:00Z",
    "ChargePeriodStart": "2026-05-01T02:00:00Z", "ChargePeriodEnd": "2026-05-01T03:00:00Z", "ChargeCategory": "Usage",
    "BilledCost": "0.096", "EffectiveCost": "0.096", "BillingCurrency": "USD",
    "ResourceId": "arn:aws:ec2:us-west-2:200000000012:instance/i-0abc", "ResourceName": "i-0abc",
    "SkuPriceDetails": '{"InstanceType":"p5.48xlarge"}', "PricingQuantity": "1", "PricingUnit": "Hours",
}


def _row13(**values: str) -> dict[str, str]:
    return {**BASE_1_3, **values}


def _file13(rows: list[dict[str, str]]) -> bytes:
    import csv

    columns = HEADER_1_3.split(",")
    out = StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        assert set(row) <= set(columns)
        writer.writerow(row)
    return out.getvalue().encode()


def test_the_admin_upload_imports_and_refuses_whole(prod, client, tmp_path):
    from django.contrib.auth.models import User
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    broken = SAMPLE_1_0.replace("0.48088426400", "0.48O88")
    response = client.post("/admin/billing/billimport/add/",
                           {"file": SimpleUploadedFile("bad.csv", broken.encode())})
    assert response.status_code == 200
    assert "Refused, nothing imported: row 5, column BilledCost: &#x27;0.48O88&#x27; is not a number" in (
        response.content.decode())
    assert not BillImport.objects.exists()
    response = client.post("/admin/billing/billimport/add/",
                           {"file": SimpleUploadedFile("good.csv", SAMPLE_1_0.encode())})
    assert response.status_code == 302 and BillImport.objects.get().lines_kept == 7
