"""The why beside the what (issue 21) over the demo, through the Django test client: a workload's "Why" block and
badges, the overview's top idle workloads' finding badges, and /findings/ grouped by node, workload or pod; every
figure is the findings API's for the same period."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from decimal import Decimal
from urllib.parse import parse_qsl, urlsplit

import pytest

from apps.findings.grouping import badge


def api_findings(client, **params) -> list[dict]:
    answer = client.get("/api/v1/findings/", {"days": 7, "page_size": 500, **params}).json()
    assert answer["count"] == len(answer["results"])
    return answer["results"]


def block(response, block_id: str):
    return next(b for b in response.context["blocks"] if b.id == block_id)


def throttled_workload(client) -> dict:
    """The workload with the most infra loss in the demo's week (as the API lists it): llm-pretrain's job."""
    loss: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for f in api_findings(client, kind="unhealthy_gpu"):
        if f["workload"]:
            loss[(f["cluster"], f["namespace"], f["workload"])] += Decimal(f["allocated_cost"])
    cluster, namespace, workload = max(loss, key=loss.get)
    return {"cluster": cluster, "namespace": namespace, "workload": workload}


def test_the_workload_page_says_why_beside_what_it_cost(as_user):
    lead = as_user("lead")
    w = throttled_workload(lead)
    page = lead.get(f"/workloads/{w['cluster']}/{w['namespace']}/{w['workload']}/?days=7")
    assert page.status_code == 200
    listed = api_findings(lead, **w)
    why = block(page, "why")
    # Every finding of the workload is in one cause row (kind, reason, node), the costliest first.
    assert sum(r["findings"] for r in why.rows) == len(listed) > 8
    assert [r["money"] for r in why.rows] == sorted((r["money"] for r in why.rows), reverse=True)
    per_node: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for f in listed:
        per_node[(f["kind"], f["node"])].append(f)
    top = why.rows[0]
    assert top["kind"] == "unhealthy_gpu" and top["what"] == "infra loss"
    node = max((n for k, n in per_node if k == "unhealthy_gpu"),
               key=lambda n: sum(Decimal(f["allocated_cost"]) for f in per_node[("unhealthy_gpu", n)]))
    mine = per_node[("unhealthy_gpu", node)]
    assert top["where"].startswith(f"node {node} · {len(mine)} GPUs")
    # The demo's runs lie inside its week: the money in the period is the runs' infra loss.
    assert top["money"] == sum(Decimal(f["allocated_cost"]) for f in mine)
    assert top["hours"] == max(f["hours"] for f in mine)
    # Its link opens the findings page on that node's findings of that kind for this workload and period.
    url = urlsplit(top["href"])
    query = dict(parse_qsl(url.query))
    assert query["node"] == node and query["kind"] == "unhealthy_gpu" and query["days"] == "7"
    followed = lead.get(url.path, query)
    groups = followed.context["groups"]
    assert [(g.label, g.count) for g in groups] == [(f"node {node}", len(mine))]
    assert url.fragment == f"finding-{groups[0].first.pk}"
    assert f'id="{url.fragment}"' in followed.content.decode()
    # Badges above the page and on the pods: the pods on the throttled nodes carry "infra loss".
    body = page.content.decode()
    assert 'class="why-badges"' in body and 'href="#why"' in body
    loss = next(b for b in page.context["why_badges"] if b["label"] == "infra loss")
    assert loss["count"] == sum(1 for f in listed if f["kind"] == "unhealthy_gpu")
    pods = {r["pod"]: r["findings"] for r in page.context["pods"]}
    for f in listed:
        assert badge(f["kind"]) in pods[f["pod"]], f["pod"]
    # The block has its CSV like every other.
    rows = list(csv.reader(io.StringIO(lead.get(page.request["PATH_INFO"], {"days": 7, "csv": "why"})
                                       .content.decode())))
    assert rows[0][0] == "Finding" and len(rows) == 1 + len(why.rows)


def test_a_workload_without_findings_says_so(as_user):
    fin = as_user("fin")
    flagged = {(f["namespace"], f["workload"]) for f in api_findings(fin)}
    usage = fin.get("/api/v1/usage/", {"days": 7, "group_by": "workload"}).json()["results"]
    clean = next(r for r in usage if (r["namespace"], r["workload"]) not in flagged and r["workload"])
    page = fin.get(f"/workloads/sim-demo/{clean['namespace']}/{clean['workload']}/?days=7")
    assert block(page, "why").rows == [] and page.context["why_badges"] == []
    assert "No finding about" in page.content.decode()


def test_the_overviews_top_idle_workloads_name_their_findings(as_user):
    lead = as_user("lead")
    top = block(lead.get("/?days=7"), "top-idle").rows
    kinds: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in api_findings(lead):
        if badge(f["kind"]) not in kinds[(f["namespace"], f["workload"])]:
            kinds[(f["namespace"], f["workload"])].append(badge(f["kind"]))
    assert any(r["findings"] for r in top)
    for r in top:
        assert sorted(r["findings"]) == sorted(kinds.get((r["namespace"], r["workload"]), [])), r["workload"]
    body = lead.get("/?days=7").content.decode()
    assert 'class="badge why" href="/workloads/' in body and '#why">infra loss</a>' in body


@pytest.mark.parametrize("by", ["node", "workload", "pod"])
def test_the_findings_page_groups_every_finding_once(as_user, by):
    fin = as_user("fin")
    listed = api_findings(fin)
    page = fin.get("/findings/", {"days": 7, "group": by})
    groups = page.context["groups"]
    assert page.context["group_by"] == by
    members = [m.finding.pk for g in groups for m in g.members]
    assert sorted(members) == sorted(f["id"] for f in listed)
    assert sum(g.cost for g in groups) == sum(Decimal(f["cost"]) for f in listed)
    # Grouped CSV: one row per group, the same sums.
    rows = list(csv.DictReader(io.StringIO(fin.get("/findings/", {"days": 7, "group": by, "format": "csv"})
                                           .content.decode())))
    assert len(rows) == len(groups)
    assert sum(int(r["Findings"]) for r in rows) == len(listed)
    assert sum(Decimal(r["Cost (USD)"]) for r in rows) == sum(Decimal(f["cost"]) for f in listed)


def test_a_nodes_per_gpu_thermal_findings_are_one_group_row(as_user):
    fin = as_user("fin")
    throttled: dict[str, int] = defaultdict(int)
    for f in api_findings(fin, kind="unhealthy_gpu"):
        if "throttle" in (f.get("detail") or {}).get("reason", ""):
            throttled[f["node"]] += 1
    node, count = max(throttled.items(), key=lambda kv: kv[1])
    assert count >= 8
    groups = fin.get("/findings/", {"days": 7}).context["groups"]  # grouped by node unless asked
    rows = [g for g in groups if g.label == f"node {node}"]
    assert len(rows) == 1 and rows[0].gpus >= 8 and rows[0].hours <= 7 * 24
    body = fin.get("/findings/", {"days": 7}).content.decode()
    assert body.count("<details class=\"finding-group\"") == len(groups)


def test_an_unknown_grouping_is_explained_not_a_500(as_user):
    page = as_user("lead").get("/findings/", {"group": "<script>"})
    assert page.status_code == 200 and page.context["group_by"] == "node"
    assert "Unknown grouping" in page.content.decode() and "<script>" not in page.content.decode()


@pytest.mark.parametrize("who", ["lead", "fin"])
@pytest.mark.parametrize("by", ["node", "workload", "pod"])
def test_the_grouped_findings_page_makes_a_bounded_number_of_queries(as_user, who, by,
                                                                     django_assert_max_num_queries):
    """Groups are folded in Python from one read of the findings (their cluster joined): no query per group."""
    client = as_user(who)
    client.get("/findings/", {"days": 7, "group": by})  # the session and first-use lookups
    with django_assert_max_num_queries(12):
        assert client.get("/findings/", {"days": 7, "group": by}).status_code == 200
