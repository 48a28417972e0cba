"""Findings folded into groups (apps/findings/grouping.py): pure, no database."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from apps.findings.grouping import (
    cause_key,
    group,
    group_by,
    group_key,
    hours_covered,
    money,
    whole_run,
    within,
)

T0 = datetime(2026, 11, 30, 18, tzinfo=UTC)
H = timedelta(hours=1)


@dataclass
class F:
    """A stand-in with a finding's attributes."""

    pk: int
    kind: str = "unhealthy_gpu"
    subject: str = ""
    cluster_id: int = 1
    team: str = "research"
    namespace: str = "ml-training"
    workload: str = "Job/llm-pretrain"
    pod: str = "llm-pretrain-1"
    node: str = "h100-train-1"
    gpu_uuid: str = ""
    start: datetime = T0
    last_hour: datetime = T0 + 24 * H
    end: datetime | None = None
    hours: int = 25
    gpu_hours: Decimal = Decimal("24.8")
    cost: Decimal = Decimal("99.08")
    allocated_cost: Decimal = Decimal("99.08")
    detail: dict = field(default_factory=lambda: {"reason": "throttle"})

    def __post_init__(self) -> None:
        self.subject = self.subject or f"{self.node}/GPU-{self.pk}/{self.pod}"
        self.gpu_uuid = self.gpu_uuid or f"GPU-{self.pk}"


def throttled_node(node: str = "h100-train-1", first_pk: int = 1, gpus: int = 8, **kw) -> list[F]:
    return [F(pk=first_pk + g, node=node, **kw) for g in range(gpus)]


def test_a_nodes_eight_throttled_gpus_are_one_group_with_their_sums_and_the_hours_once():
    findings = throttled_node() + [F(pk=20, kind="idle_allocation", node="h100-train-2", pod="jupyter-0",
                                     workload="StatefulSet/jupyter", cost=Decimal("91.08"),
                                     allocated_cost=Decimal("91.08"), hours=23, last_hour=T0 + 22 * H, detail={})]
    groups = group_by([whole_run(f) for f in findings], "node")
    assert [g.label for g in groups] == ["node h100-train-1", "node h100-train-2"]  # the costliest first
    node = groups[0]
    assert node.count == 8 and node.gpus == 8 and node.kinds == [("unhealthy_gpu", 8)]
    assert node.hours == 25  # 8 GPUs over the same 25 h: 25 clock hours, not 200
    assert node.gpu_hours == Decimal("198.4") and node.cost == Decimal("792.64")
    assert node.infra_loss == Decimal("792.64") and node.money == Decimal("792.64")
    assert node.ongoing == 8 and node.pods == ["llm-pretrain-1"] and node.since == T0
    assert groups[1].infra_loss == 0 and groups[1].money == Decimal("91.08")


def test_grouped_by_workload_two_nodes_of_one_job_are_one_group_and_by_pod_two():
    findings = throttled_node() + throttled_node("h100-train-0", first_pk=10, pod="llm-pretrain-0", hours=3,
                                                 start=T0 + 22 * H, last_hour=T0 + 24 * H)
    by_workload = group_by([whole_run(f) for f in findings], "workload")
    assert [(g.label, g.count, g.hours) for g in by_workload] == [("ml-training/Job/llm-pretrain", 16, 25)]
    by_pod = group_by([whole_run(f) for f in findings], "pod")
    # As costly as each other: by label.
    assert [(g.label, g.count) for g in by_pod] == [("pod ml-training/llm-pretrain-0", 8),
                                                    ("pod ml-training/llm-pretrain-1", 8)]
    with pytest.raises(ValueError, match="group by one of"):
        group_by([], "team")


def test_findings_without_a_workload_pod_or_node_fall_back_to_what_they_name():
    queue = F(pk=1, kind="borrowed_idle", subject="research-cq", workload="", pod="", node="", detail={})
    signal = F(pk=2, kind="missing_signal", subject="sm_active", team="", workload="", pod="", node="", detail={})
    rogue = F(pk=3, kind="unattributed_activity", team="", workload="", pod="", node="l4-0", detail={})
    assert group_key(queue, "workload")[1] == "queue research-cq"
    assert group_key(signal, "pod")[1] == "signal sm_active"
    assert group_key(rogue, "workload") == ("1:n:l4-0", "node l4-0")
    # The same node name in two clusters is two groups.
    assert group_key(rogue, "node") != group_key(F(pk=4, cluster_id=2, node="l4-0"), "node")


def test_causes_split_by_kind_reason_and_node():
    xid = F(pk=30, detail={"reason": "xid"})
    idle = F(pk=31, kind="idle_allocation", detail={})
    findings = throttled_node() + throttled_node("h100-train-0", first_pk=10) + [xid, idle]
    causes = group([whole_run(f) for f in findings], cause_key)
    labels = sorted((g.label, g.nodes[0], g.count) for g in causes)
    assert labels == [("idle", "h100-train-1", 1), ("infra loss (throttle)", "h100-train-0", 8),
                      ("infra loss (throttle)", "h100-train-1", 8), ("infra loss (xid)", "h100-train-1", 1)]


def test_money_is_the_infra_loss_of_an_unhealthy_gpu_and_the_cost_of_anything_else():
    held = F(pk=1, cost=Decimal("20"), allocated_cost=Decimal("8"))
    straggler = F(pk=2, kind="straggler", cost=Decimal("77.92"), allocated_cost=Decimal("160"), detail={})
    assert money(held) == Decimal("8") and money(straggler) == Decimal("77.92")
    nobody = F(pk=3, team="", cost=Decimal("61.9"), allocated_cost=Decimal("0"))
    assert whole_run(nobody).infra_loss == 0  # a GPU nobody held is the platform's, no team's loss


def test_within_keeps_each_runs_hours_inside_the_period_only():
    run = F(pk=1, start=T0, last_hour=T0 + 9 * H, hours=10)
    later = F(pk=2, subject=run.subject, start=T0 + 20 * H, last_hour=T0 + 21 * H, hours=2)
    outside = F(pk=3, start=T0 - 5 * H, last_hour=T0 - 2 * H, hours=4)
    rows = [("unhealthy_gpu", run.subject, T0 + i * H, "1", "4", "4") for i in (*range(10), 20, 21)]
    rows += [("unhealthy_gpu", outside.subject, T0 - i * H, "1", "4", "4") for i in range(2, 6)]
    start, end = T0 + 5 * H, T0 + 21 * H
    members = within([run, later, outside], rows, start, end)
    assert [(m.finding.pk, m.hours, m.cost) for m in members] == [(1, 5, Decimal(20)), (2, 1, Decimal(4))]
    assert group(members, cause_key)[0].hours == 6


@pytest.mark.parametrize(("spans", "hours"), [
    ([], 0),
    ([(T0, T0 + 3 * H)], 3),
    ([(T0, T0 + 3 * H), (T0 + H, T0 + 2 * H)], 3),  # inside another
    ([(T0, T0 + 3 * H), (T0 + 3 * H, T0 + 5 * H)], 5),  # touching
    ([(T0, T0 + 2 * H), (T0 + 4 * H, T0 + 5 * H)], 3),  # a gap
    ([(T0 + H, T0 + 4 * H), (T0, T0 + 2 * H)], 4),  # overlapping, out of order
])
def test_hours_covered_counts_each_clock_hour_once(spans, hours):
    assert hours_covered(spans) == hours
