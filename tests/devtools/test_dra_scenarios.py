"""What DRA and HAMi add to the scenarios: `large` with a fraction of its nodes on DRA (the same jobs, the same
truth), and the demo's switch (appended after the demo, which stays as it is)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from devtools.simulator import scenarios
from devtools.simulator.exposition import dcgm_samples
from devtools.simulator.scenarios import build_scenario
from tests.devtools.conftest import END
from tests.devtools.test_scenarios import _canon, fingerprint
from tests.oracle import expected_ledger

NODES = 30  # 240 GPUs: the large scenario's shape, small enough for the oracle


def _jobs(sc):
    return [(p.namespace, p.name, p.node, p.start, p.finish, p.act) for p in sc.pods]


def test_large_puts_a_fraction_of_its_nodes_on_dra_without_changing_its_jobs():
    plain = build_scenario("large", seed=0, end=END, days=1, large_nodes=NODES)
    assert fingerprint(plain) == fingerprint(build_scenario("large", seed=0, end=END, days=1, large_nodes=NODES,
                                                            dra_fraction=0.0))
    assert not plain.dra_versions and not plain.claims
    third = build_scenario("large", seed=0, end=END, days=1, large_nodes=NODES, dra_fraction=1 / 3)
    dra_nodes = [n for n in third.nodes if n.kind == "dra"]
    assert [n.name for n in dra_nodes] == [n.name for i, n in enumerate(plain.nodes)
                                           if i % 3 == 2 and not n.zero_alloc]
    assert all(not any(r.startswith("nvidia.com/") for r in n.allocatable) for n in dra_nodes)
    assert third.dra_versions == ("v1",) and _jobs(third) == _jobs(plain)
    on_dra = [p for p in third.pods if p.node in {n.name for n in dra_nodes}]
    assert on_dra and all(p.idx in third.pod_claims and not any(c.gpu for c in p.containers) for p in on_dra)
    # the same work, handed out by claims: the same truth, hour by hour
    start = END - timedelta(hours=6)
    a, b = expected_ledger(plain, start, END), expected_ledger(third, start, END)
    assert b.totals() == pytest.approx(a.totals()) and a.totals()["allocated"] > 100
    assert {(r["hour"], r["pod"]): r["allocated"] for r in b.pod_hours} == pytest.approx(
        {(r["hour"], r["pod"]): r["allocated"] for r in a.pod_hours})
    assert {r["allocation_mode"] for r in b.pod_hours} == {"device_plugin", "dra"}
    with pytest.raises(ValueError, match="large scenario only"):
        build_scenario("demo", end=END, dra_fraction=0.5)
    with pytest.raises(ValueError, match="within"):
        build_scenario("large", end=END, large_nodes=3, dra_fraction=2.0)


def test_the_demo_switch_appends_a_dra_node_group_and_a_hami_node(demo):
    assert scenarios.DEMO_WITH_DRA is True and not demo.dra_versions and not demo.hami  # `demo`: with_dra=False
    assert build_scenario("demo", seed=0, end=END, days=1).dra_versions == ("v1",)  # on by default
    sc = build_scenario("demo", seed=0, end=END, with_dra=True)
    n = len(demo.pods)
    assert _canon(sc.pods[:n]) == _canon(demo.pods) and _canon(sc.nodes[:len(demo.nodes)]) == _canon(demo.nodes)
    t = END - timedelta(hours=30)
    base = {(m, tuple(sorted(lab.items()))): v for m, lab, v in dcgm_samples(demo, t)}
    both = {(m, tuple(sorted(lab.items()))): v for m, lab, v in dcgm_samples(sc, t)}
    assert {k: both[k] for k in base} == base  # the demo's own series and values did not move
    added = {x.name: x.kind for x in sc.nodes[len(demo.nodes):]}
    assert added == {"h100-dra-0": "dra", "h100-dra-1": "dra", "l4-hami-0": "hami"}
    assert sc.dra_versions == ("v1",) and sc.dra_attribution
    led = expected_ledger(sc, END - timedelta(hours=24), END)
    modes = {r["allocation_mode"] for r in led.pod_hours}
    assert {"dra", "hami"} <= modes and {r["claim"] for r in led.claim_hours} == {"warm-spare"}
    assert {r["team"] for r in led.pod_hours if r["pod"] in ("rag-dra-0", "eval-dra-0")} == {"serving", "research"}
    with pytest.raises(ValueError, match="demo scenario only"):
        build_scenario("tiny", end=END, with_dra=True)


def test_the_demo_switch_runs_through_the_whole_scenario_on_a_weekly_rhythm():
    """A longer demo has no step at its end (bench/forecast.py): the add-on's services and tenants run from the
    start, its jobs come back every week, so each of its whole weeks holds the same GPU-hours per team; its last two
    days are the short demos' (their cases, one copy each)."""
    days = 15
    sc = build_scenario("demo", seed=0, end=END, days=days, with_dra=True)
    added = {n.name for n in sc.nodes if n.kind in ("dra", "hami")}
    weeks = []
    for k in (2, 1):
        start = END - timedelta(days=7 * k)
        led = expected_ledger(sc, start, start + timedelta(days=7))
        per_team: dict[str, float] = {}
        for r in led.rows:
            if r["node"] in added:
                per_team[r["team"]] = per_team.get(r["team"], 0.0) + r["allocated"]
        weeks.append(per_team)
    assert set(weeks[0]) >= {"research", "serving", "data"} and weeks[0]["research"] > 500
    assert weeks[1] == pytest.approx(weeks[0])  # the same week twice: no step
    names = [p.name for p in sc.pods]
    assert "eval-dra-0" in names and "eval-dra-w1-0" in names and "eval-dra-w2-0" in names
    short = build_scenario("demo", seed=0, end=END, days=2, with_dra=True)
    assert not [p.name for p in short.pods if "-w1" in p.name]  # one week's cases only
    assert {c.name for c in short.claims if c.name.startswith("warm-spare")} == {"warm-spare"}


def test_the_dra_builders_refuse_what_no_cluster_does():
    from devtools.simulator import dra
    from devtools.simulator.model import Scenario

    sc = Scenario("x", 0, END, 1)
    node = sc.add_node("n", "A100", 2, {}, kind="mig", mig_layout=[[["3g.40gb", 2], ["4g.40gb", 1]]])
    dra.make_dra(sc, node, gfd=False, whole_too=(0,))
    assert [d.name for d in sc.dra_devices["n"]] == ["gpu-0", "gpu-0-mig-3g40gb-9-4", "gpu-0-mig-4g40gb-5-0", "gpu-1"]
    whole, mig3 = [dra.Request("gpu", dra.GPU_CLASS)], [dra.Request("m", dra.MIG_CLASS, profile="3g.40gb")]
    with pytest.raises(ValueError, match="does not satisfy"):
        dra.add_claim(sc, "a", "bad", "n", mig3, ["gpu-0-mig-4g40gb-5-0"], created=0, allocated=0, released=1)
    c = dra.add_claim(sc, "a", "w", "n", whole, ["gpu-0"], created=sc.t0, allocated=sc.t0, released=sc.t0 + 3600)
    with pytest.raises(ValueError, match="outside the allocation"):
        dra.consumer_pod(sc, "a", "late", c, start=sc.t0 + 1800, finish=sc.t0 + 7200, end_phase="Succeeded")
    with pytest.raises(ValueError, match="its own namespace"):
        dra.consumer_pod(sc, "b", "other", c, start=sc.t0)
    dra.add_claim(sc, "a", "m", "n", mig3, ["gpu-0-mig-3g40gb-9-4"], created=sc.t0, allocated=sc.t0 + 3600,
                  released=sc.t0 + 7200)
    dra.check(sc)  # one after the other: fine
    dra.add_claim(sc, "a", "m2", "n", whole, ["gpu-0"], created=sc.t0, allocated=sc.t0 + 5400, released=sc.t0 + 9000)
    with pytest.raises(ValueError, match="held at once"):  # the whole GPU while one of its MIG devices is held
        dra.check(sc)
    with pytest.raises(ValueError, match="does not fit"):
        dra.placements(["4g.40gb", "4g.40gb"])
    assert dra.placements(["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]) == [4, 0, 2, 3]
