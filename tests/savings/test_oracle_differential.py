"""Savings on the demo, collected through the real protocols (the simulator's Kubernetes API, a real Prometheus
backfilled with its history), equal the oracle's (`tests.oracle.savings`): the workloads the simulator leaves idle
get a stop item and the over-provisioned ones a right-size item (a smaller MIG profile) or a move to a cheaper GPU model
with the right target and dollars; no steady,
well-used workload gets any item; a team lead sees only their teams' items, on the selector, the API and the page."""

from __future__ import annotations

import pytest

from apps.accounts.selectors import visible_team_names
from apps.accounts.services import add_user
from apps.findings.constants import Kind
from apps.findings.models import Finding
from apps.findings.selectors import listed_q
from apps.savings.rules import Action
from apps.savings.selectors import savings_list
from tests.ingest.conftest import DEMO_PRICES, priced_day, shared_priced_day, sim_world  # noqa: F401 (the session's)

# No `django_db` mark: the shared priced day opens its transaction before `db` (tests/harness/shared_rows.py).
pytestmark = pytest.mark.services
PRICES = DEMO_PRICES
# Steady, well-used work of the demo: never an item.
STEADY = {("ml-training", "Job/llm-pretrain"), ("llm-serving", "Deployment/embedder"),
          ("llm-serving", "Deployment/mixtral"), ("llm-serving", "Deployment/asr"),
          ("llm-serving", "LeaderWorkerSet/llama-70b"), ("llm-serving", "Deployment/reranker")}


@pytest.fixture
def collected(priced_day):  # noqa: F811
    """The demo's day collected at PRICES, shared with the other oracle tests (tests/ingest/conftest.py)."""
    return priced_day


def test_idle_and_over_provisioned_workloads_get_the_oracles_action_and_dollars(sim_world, collected):  # noqa: F811
    from tests.oracle.savings import expected_savings

    expected = expected_savings(sim_world.scenario, sim_world.start, sim_world.end, PRICES)
    found = savings_list(visible_teams=None, start=sim_world.start, end=sim_world.end)
    items = {(s.namespace, s.workload): s for s in found.items if s.action != Action.RETURN_QUOTA}
    # The scenario's cases are there: idle notebooks, the light inference service on a 3g.40gb instance, and the
    # light OCR service on a whole A100 that a whole L4 holds (a MIG 3g.40gb too, which saves less).
    assert expected[("llm-serving", "Deployment/whisper")]["action"] == "right_size"
    ocr = expected[("llm-serving", "Deployment/ocr")]
    assert (ocr["action"], ocr["target"], ocr["alternative"]["target"]) == ("cheaper_model", "NVIDIA-L4", "3g.40gb")
    assert ocr["dollars"] > ocr["alternative"]["dollars"] > 0
    assert any(e["action"] == "stop_idle" for e in expected.values())
    assert sorted(items) == sorted(expected)  # every saving, and none on steady, well-used work
    assert not STEADY & set(items)
    hours = (sim_world.end - sim_world.start).total_seconds() / 3600
    for key, e in sorted(expected.items()):
        s = items[key]
        assert s.action == e["action"], key
        assert s.team == e["team"], key
        assert float(s.period_cost) == pytest.approx(e["dollars"], abs=5e-3), key
        assert float(s.monthly) == pytest.approx(e["dollars"] * 720 / hours, abs=0.2), key
        if e["action"] == "right_size":
            assert f"to MIG {e['target']}" in s.summary, (key, s.summary)
        if e["action"] == "cheaper_model":
            assert s.summary.endswith(f"to a whole {e['target']}"), (key, s.summary)
            evidence = {x.label: x.value for x in s.evidence}
            assert "NVIDIA-L4" in evidence["placeable on"] and "$0.80/GPU-hour" in evidence["prices"], evidence
        if e.get("alternative"):  # the other fit, beside the figure
            alt = next(x.value for x in s.evidence if x.label == "alternative")
            assert e["alternative"]["target"] in alt and f"${e['alternative']['dollars']:,.2f}" in alt, alt
        assert s.evidence and s.assumptions, key
    assert [s.rank for s in found.items] == list(range(1, len(found.items) + 1))
    assert [s.monthly for s in found.items] == sorted((s.monthly for s in found.items), reverse=True)
    # Quota items are the borrowed-while-idle findings' queues, one each.
    queues = {f"ClusterQueue/{q}" for q in Finding.objects.filter(listed_q(), cluster=collected,
                                                                   kind=Kind.BORROWED_IDLE).values_list("subject",
                                                                                                       flat=True)}
    assert {s.workload for s in found.items if s.action == Action.RETURN_QUOTA} == queues


def test_a_team_lead_sees_only_their_teams_items(sim_world, collected, client):  # noqa: F811
    everything = savings_list(visible_teams=None, start=sim_world.start, end=sim_world.end)
    teams = {s.team for s in everything.items}
    assert {"research", "serving"} <= teams
    lead = add_user("serving-lead", password=None, teams=["serving"])
    mine = savings_list(visible_teams=visible_team_names(lead), start=sim_world.start, end=sim_world.end)
    assert mine.items and {s.team for s in mine.items} == {"serving"}
    assert len(mine.items) == len([s for s in everything.items if s.team == "serving"])
    client.force_login(lead)
    window = {"start": sim_world.start.strftime("%Y-%m-%dT%H:00Z"), "end": sim_world.end.strftime("%Y-%m-%dT%H:00Z")}
    api = client.get("/api/v1/savings/", window)
    assert api.status_code == 200, api.content
    rows = api.json()["results"]
    assert rows and {r["team"] for r in rows} == {"serving"}
    assert all(isinstance(r["monthly"], str) for r in rows)  # money as decimal strings
    other = client.get("/api/v1/savings/", {**window, "team": "research"})
    assert other.status_code == 400 and "team" in other.json()["errors"]
    (move,) = [r for r in rows if r["workload"] == "Deployment/ocr"]  # the new action, with its evidence
    assert move["action"] == "cheaper_model" and "NVIDIA-L4" in move["evidence"]["placeable on"]
    assert "3g.40gb" in move["evidence"]["alternative"] and move["assumptions"]
    csv = client.get("/api/v1/savings/", {**window, "format": "csv"})
    assert csv.status_code == 200 and csv["Content-Type"].startswith("text/csv")
    assert csv.content.decode().count("\n") == len(rows) + 1
    assert "cheaper_model" in csv.content.decode() and "placeable on" in csv.content.decode()
    page = client.get("/savings/", window)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Deployment/whisper" in html and "Move to a cheaper GPU model" in html
    assert not any(s.workload in html for s in everything.items if s.team != "serving" and s.workload)
