"""The truth of the findings about GPUs handed out by DRA claims and HAMi fractions: ``idle_claim``,
``oversubscribed_gpu``, ``missing_attribution`` (definitions in ``findings``, called from ``expected_findings``).

Each reads the hours of the oracle's ledger (``Ledger.claim_hours``, ``Ledger.splits``, ``Ledger.pod_hours``), so
a finding's GPU-hours are the ledger's.
"""

from __future__ import annotations

from datetime import datetime

from devtools.simulator import dra
from devtools.simulator.model import Scenario

from . import accelerators as acc
from .flagging import IDLE_MIN_HOURS, finding, holder_rows, holders, model, runs, top_holder
from .ledger import Ledger, _physical

KINDS = ("idle_claim", "oversubscribed_gpu", "missing_attribution")


def idle_claims(sc: Scenario, led: Ledger, last_hour: datetime) -> list[dict]:
    per_claim: dict = {}
    for r in led.claim_hours:
        per_claim.setdefault((r["namespace"], r["claim"]), {})[r["hour"]] = r
    by_name = {(c.namespace, c.name): c for c in sc.claims}
    out = []
    for key, per_hour in sorted(per_claim.items()):
        c = by_name[key]
        devices = sorted(acc.held_devices(sc, c), key=lambda d: d.name)
        first = sc.entities[devices[0].entity]
        for run in runs(sorted(per_hour), IDLE_MIN_HOURS):
            gpu_hours = sum(per_hour[h]["allocated"] for h in run)
            out.append(finding(
                sc, "idle_claim", run, last_hour, team=per_hour[run[0]]["team"], namespace=c.namespace,
                workload=f"ResourceClaim/{c.name}", node=c.node, gpu_uuid=_physical(sc, first).uuid,
                gpu_instance_id=first.gi_id or "", gpu_model=model(sc, c.node), gpu_hours=gpu_hours,
                detail={"claim": c.name, "devices": [{"name": d.name, "uuid": d.uuid} for d in devices],
                        "idle_gpu_hours": gpu_hours},
            ))
    return out


def oversubscribed(sc: Scenario, led: Ledger, hours: list, last_hour: datetime) -> list[dict]:
    tenants_by_hour: dict = {}  # (GPU entity, hour) -> [(pod row, allocated)]
    for r in led.pod_hours:
        if r["allocation_mode"] == "hami":
            for u in r["units"]:
                tenants_by_hour.setdefault((u["entity"], r["hour"]), []).append((r, u["allocated"]))
    gpus = sorted({ent for split in led.splits.values() for ent in split.oversubscribed})
    out = []
    for ent in gpus:
        e = sc.entities[ent]
        flagged = {h: led.splits[h] for h in hours if led.splits[h].oversubscribed.get(ent)}
        for run in runs(sorted(flagged)):
            tenants = holders(run, tenants_by_hour, ent)
            out.append(finding(
                sc, "oversubscribed_gpu", run, last_hour, node=e.node, gpu_uuid=e.uuid, gpu_model=model(sc, e.node),
                gpu_hours=sum(flagged[h].oversubscribed[ent] for h in run) / 3600.0,
                detail={"max_share_sum": max(flagged[h].peak[ent] for h in run), "tenants": holder_rows(tenants)},
                **top_holder(tenants),
            ))
    return out


def missing_attribution(sc: Scenario, led: Ledger, last_hour: datetime) -> list[dict]:
    per_node: dict = {}  # node -> hour -> unmeasured DRA GPU-hours of devices that do report
    for r in led.pod_hours:
        if r["allocation_mode"] != "dra":
            continue
        for u in r["units"]:
            reports = led.cache.average(u["entity"], u["from"], u["to"], key="fb_used") is not None
            if u["activity"] is None and reports and not sc.entities[u["entity"]].labels_lost:
                hours = per_node.setdefault(r["node"], {})
                hours[r["hour"]] = hours.get(r["hour"], 0.0) + u["allocated"]
    out = []
    for node, per_hour in sorted(per_node.items()):
        for run in runs(sorted(per_hour)):
            gpu_hours = sum(per_hour[h] for h in run)
            out.append(finding(sc, "missing_attribution", run, last_hour, node=node, gpu_model=model(sc, node),
                               gpu_hours=gpu_hours, detail={"unmeasured_gpu_hours": gpu_hours,
                                                            "driver": dra.DRIVER}))
    return out


def accelerator_findings(sc: Scenario, led: Ledger, hours: list, last_hour: datetime) -> dict[str, list]:
    return {"idle_claim": idle_claims(sc, led, last_hour),
            "oversubscribed_gpu": oversubscribed(sc, led, hours, last_hour),
            "missing_attribution": missing_attribution(sc, led, last_hour)}
