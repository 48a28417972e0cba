"""The findings' truth (``expected_findings``: every kind's definition is in its docstring)."""

from __future__ import annotations

import statistics
from datetime import datetime

from devtools.simulator.model import SEG, Scenario, to_ts

from .accelerator_findings import accelerator_findings
from .flagging import (
    FINDING_KINDS,
    HARDWARE_XIDS,
    IDLE_HELD_FB_MIB,
    IDLE_MIN_HOURS,
    IDLE_THRESHOLD,
    STRAGGLER_FRACTION,
    STRAGGLER_MIN_HOURS,
    THROTTLE_BITS,
    THROTTLE_REASONS,
    UNATTRIBUTED_THRESHOLD,
    UNHEALTHY_REASONS,
    holder_rows,
    holders,
    top_holder,
)
from .flagging import finding as _finding
from .flagging import model as _model
from .flagging import runs as _runs
from .ledger import _hours, _physical, _reports, _SignalCache, expected_ledger


def expected_findings(sc: Scenario, start: datetime, end: datetime) -> dict[str, list[dict]]:
    """The findings of [start, end) (whole UTC hours), per kind: ``unhealthy_gpu``, ``straggler``,
    ``unattributed_activity``, ``idle_held``, ``idle_claim``, ``oversubscribed_gpu``, ``missing_attribution``, each
    a list of dicts sorted by (start, node, gpu_uuid, pod). A DRA or HAMi node never has a zero-allocatable or an
    unattributed-activity finding.

    Every finding has: ``kind``, ``reason`` (unhealthy_gpu only: xid | throttle | remap | ecc | vanished),
    the subject ``cluster``, ``team``, ``namespace``, ``workload``, ``pod`` (None where no pod is concerned),
    ``node``, ``gpu_uuid``, ``gpu_instance_id`` ("" but for a MIG instance), ``gpu_model`` (the price key:
    cost = ``gpu_hours`` x the model's price), ``start`` (the first flagged hour), ``end`` (the end of the
    last flagged hour, or None when the last flagged hour is the window's last hour: ongoing), ``hours``
    (flagged hours), ``gpu_hours`` and ``detail``. A finding is one maximal run of consecutive flagged hours
    of one subject (and reason). Hours are evaluated on the DCGM samples of the hour, which in the simulator
    are constant per 5-minute segment (``devtools.simulator.model``); "some sample of the hour" means some
    segment of it, "the hour's increase" of a counter its value in the hour's last segment minus its value in
    the hour's first (what ``max_over_time(c[1h]) - min_over_time(c[1h])`` reads for a monotonic counter).

    unhealthy_gpu: subject = a physical GPU (node, UUID; a MIG instance's series count for its GPU). An hour
      is flagged, per reason:
      * xid: some sample of DCGM_FI_DEV_XID_ERRORS (the last XID code, not a count) of the GPU or of one of
        its MIG instances is in ``HARDWARE_XIDS`` (application XIDs such as 13, 31, 43 are not findings).
        In the demo every XID shows one code, so ``max_over_time`` over the hour finds it;
      * throttle: some sample of DCGM_FI_DEV_CLOCKS_EVENT_REASONS (or the older name
        DCGM_FI_DEV_CLOCK_THROTTLE_REASONS) has a bit of ``THROTTLE_REASONS`` (0x8 HW slowdown, 0x20 SW
        thermal, 0x40 HW thermal, 0x80 HW power brake; SW power cap 0x4 and GPU idle 0x1 do not count). In the
        simulator a throttling value is never below a non-throttling one within an hour, so ``max_over_time``
        of the bitmask over the hour has such a bit exactly in these hours;
      * remap: DCGM_FI_DEV_ROW_REMAP_FAILURE is 1 in some sample, or DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS
        increased in the hour (correctable remapped rows are healthy, never a finding);
      * ecc: DCGM_FI_DEV_ECC_DBE_VOL_TOTAL increased in the hour;
      * vanished: the GPU's node existed (and was Ready) the whole hour and no DCGM series of the GPU has
        any sample in the hour.
      ``gpu_hours`` = flagged hours x 1 (the GPU's capacity while unhealthy); ``detail``: ``held_gpu_hours``
      (the allocated GPU-hours, ledger definition, of the pods holding the GPU or its instances within the
      flagged hours: what teams were charged for it, the infra loss), ``holders`` (per pod: team, namespace,
      workload, pod, gpu_hours), and per reason: xid -> ``xid_codes`` (hardware codes seen); throttle ->
      ``reasons`` (names of the throttling bits seen), ``throttled_seconds`` (time any of them was set),
      ``power_violation_seconds`` / ``thermal_violation_seconds`` (sum over the flagged hours of the counters'
      hourly increases, ns / 1e9: the counters step at 5-minute boundaries by the throttled time of the segment
      before, so an hour's increase covers its first 55 minutes and the previous hour's last 5); remap ->
      ``row_remap_failure`` (bool), ``uncorrectable_remapped_rows`` (sum of hourly increases); ecc ->
      ``ecc_dbe`` (sum of hourly increases). Subject team/namespace/workload/pod: the holder with the most held
      GPU-hours in the run (None when nobody held it).
    straggler: subject = a workload (namespace, ``expected_workload``) with, in an hour, at least two units
      that are whole GPUs or MIG instances (time-sliced replicas excluded) measured in that hour; a unit's
      activity is its hourly SM activity as the ledger defines it (the time-average of DCGM_FI_PROF_SM_ACTIVE
      over the held part of the hour). The hour is flagged when the workload's median unit activity
      (``statistics.median``) is at least ``IDLE_THRESHOLD`` (an idle workload does not straggle) and its
      slowest unit's activity is below ``STRAGGLER_FRACTION`` x that median; a finding needs at least
      ``STRAGGLER_MIN_HOURS`` consecutive flagged hours. team/pod/node/gpu: the slowest unit in the run's first
      hour. ``gpu_hours`` (the waste) = sum over flagged hours and the other units u of
      max(0, 1 - slowest / activity_u) x u's allocated GPU-hours in the hour. ``detail``: ``min_ratio``
      (lowest slowest/median), ``per_hour`` [{hour, slowest, median, fastest, units}].
    unattributed_activity: subject = a device: a GPU not in MIG mode, or a MIG instance (the GPU-level
      series of a GPU in MIG mode aggregate its instances and are never a subject), that no pod holds at any
      instant of the hour (the Kubernetes allocation: a GPU whose exporter lost the pod labels while a pod
      holds it, a100-mig-0 GPU 6 in the demo, is held: its holder's hours are unmeasured, not unattributed),
      whose SM activity averaged over the hour's samples (its series carry no pod identity) is above
      ``UNATTRIBUTED_THRESHOLD``. ``gpu_hours`` = flagged hours x the device's share of a GPU (1, or a MIG
      instance's slices / 7). ``detail``: ``working_gpu_hours`` (sum of hourly activity x share),
      ``activity`` (mean of the hourly averages).
    idle_held: subject = a pod, in hours in which its measured units' activity (the ledger's working /
      (allocated - unmeasured), SM) is below ``IDLE_THRESHOLD`` and the framebuffer in use
      (DCGM_FI_DEV_FB_USED, MiB, time-averaged over the held part of the hour) of at least one of its
      measured units is above ``IDLE_HELD_FB_MIB``; at least ``IDLE_MIN_HOURS`` consecutive hours.
      ``gpu_hours`` = the pod's allocated GPU-hours in those hours. ``detail``: ``fb_used_mib`` (the highest
      hourly value), ``activity`` (the highest hourly activity).
    idle_claim: subject = a DRA claim (namespace, name): hours in which it is allocated with no running consumer
      for some time (its ``Ledger.claim_hours``); at least ``IDLE_MIN_HOURS`` consecutive hours. team, namespace
      and workload ``ResourceClaim/<name>`` as the ledger's claim rows, node = the claim's node, gpu_uuid /
      gpu_instance_id = the physical GPU (and MIG instance) of its first device by name. ``gpu_hours`` = the
      claim's idle GPU-hours in the run. ``detail``: ``claim``, ``devices`` [{name, uuid}], ``idle_gpu_hours``.
    oversubscribed_gpu: subject = a physical GPU of a HAMi node (node, UUID): hours in which its tenants' shares
      add up past 1 for some time. ``gpu_hours`` = the time (hours) it was oversubscribed in the run.
      team/namespace/workload/pod: the tenant with the most allocated (scaled) GPU-hours on it in the run.
      ``detail``: ``max_share_sum`` (the largest sum of shares), ``tenants`` [{team, namespace, workload, pod,
      gpu_hours}] (their allocated GPU-hours on the GPU in the run's hours).
    missing_attribution: subject = a DRA node: hours in which a unit a pod holds there through a claim is
      unmeasured although its device reports series (they carry no pod: the exporter lacks DRA attribution).
      ``gpu_hours`` = those units' allocated GPU-hours. ``detail``: ``unmeasured_gpu_hours``, ``driver``.
    """
    a0, b0 = to_ts(start), to_ts(end)
    if a0 % 3600 or b0 % 3600:
        raise ValueError("start and end must be whole hours")
    hours = list(_hours(start, end))
    last_hour = hours[-1]
    led = expected_ledger(sc, start, end, "sm_active")
    cache: _SignalCache = led.cache
    by_pod = {(p.namespace, p.name): p for p in sc.pods}
    out: dict[str, list] = {k: [] for k in FINDING_KINDS}

    # ---- unhealthy GPUs
    holders_by_gpu: dict = {}  # (physical entity, hour) -> [(pod row, allocated)]
    for r in led.pod_hours:
        for u in r["units"]:
            phys = _physical(sc, sc.entities[u["entity"]]).idx
            holders_by_gpu.setdefault((phys, r["hour"]), []).append((r, u["allocated"]))
    watched = set(sc.health) | {_physical(sc, sc.entities[e]).idx for e in sc.xid_events}
    for gidx in sorted(watched):
        gpu = sc.entities[gidx]
        node = sc.node_by_name[gpu.node]
        members = [gpu] + [sc.entities[c] for c in gpu.children]
        flagged: dict = {reason: {} for reason in UNHEALTHY_REASONS}  # reason -> hour -> detail
        for h in hours:
            ha = h.timestamp()
            segs = range(int(ha // SEG), int((ha + 3600) // SEG))
            if node.created > ha:
                continue
            present = [seg for seg in segs if _reports(sc, gpu, seg * SEG)]
            if not present:
                flagged["vanished"][h] = {}
                continue
            codes = {int(v["xid"]) for m in members for seg in present
                     if (v := cache.values(m.idx, seg)) is not None and int(v["xid"]) in HARDWARE_XIDS}
            if codes:
                flagged["xid"][h] = {"xid_codes": codes}
            vals = [cache.values(gidx, seg) for seg in present]
            bits = 0
            throttled = 0
            for v in vals:
                b = int(v["throttle"]) & THROTTLE_BITS
                bits |= b
                throttled += SEG if b else 0
            if bits:
                first, last = vals[0], vals[-1]
                flagged["throttle"][h] = {
                    "bits": bits, "throttled_seconds": float(throttled),
                    "power_violation_seconds": (last["power_violation"] - first["power_violation"]) / 1e9,
                    "thermal_violation_seconds": (last["thermal_violation"] - first["thermal_violation"]) / 1e9,
                }
            failure = any(v.get("remap_failure") for v in vals)
            remapped = vals[-1].get("remap_uncorrectable", 0.0) - vals[0].get("remap_uncorrectable", 0.0)
            if failure or remapped > 0:
                flagged["remap"][h] = {"row_remap_failure": failure, "uncorrectable_remapped_rows": remapped}
            dbe = vals[-1]["ecc_dbe"] - vals[0]["ecc_dbe"]
            if dbe > 0:
                flagged["ecc"][h] = {"ecc_dbe": dbe}
        for reason, per_hour in flagged.items():
            for run in _runs(sorted(per_hour)):
                held = holders(run, holders_by_gpu, gidx)
                detail: dict = {"held_gpu_hours": sum(held.values()), "holders": holder_rows(held)}
                ds = [per_hour[h] for h in run]
                if reason == "xid":
                    detail["xid_codes"] = sorted(set().union(*(d["xid_codes"] for d in ds)))
                elif reason == "throttle":
                    bits = 0
                    for d in ds:
                        bits |= d["bits"]
                    detail["reasons"] = [name for bit, name in sorted(THROTTLE_REASONS.items()) if bits & bit]
                    for k in ("throttled_seconds", "power_violation_seconds", "thermal_violation_seconds"):
                        detail[k] = sum(d[k] for d in ds)
                elif reason == "remap":
                    detail["row_remap_failure"] = any(d["row_remap_failure"] for d in ds)
                    detail["uncorrectable_remapped_rows"] = sum(d["uncorrectable_remapped_rows"] for d in ds)
                elif reason == "ecc":
                    detail["ecc_dbe"] = sum(d["ecc_dbe"] for d in ds)
                out["unhealthy_gpu"].append(_finding(
                    sc, "unhealthy_gpu", run, last_hour, reason=reason, node=gpu.node, gpu_uuid=gpu.uuid,
                    gpu_model=_model(sc, gpu.node), gpu_hours=float(len(run)), detail=detail, **top_holder(held),
                ))

    # ---- stragglers
    per_workload: dict = {}  # (namespace, workload) -> hour -> [(row, unit)]
    for r in led.pod_hours:
        for u in r["units"]:
            if u["activity"] is None or u["time_sliced"]:
                continue
            per_workload.setdefault((r["namespace"], r["workload"]), {}).setdefault(r["hour"], []).append((r, u))
    for (namespace, workload), per_hour in sorted(per_workload.items()):
        flagged = {}
        for h, units in per_hour.items():
            if len(units) < 2:
                continue
            acts = [u["activity"] for _r, u in units]
            median = statistics.median(acts)
            slowest_r, slowest_u = min(units, key=lambda ru: (ru[1]["activity"], ru[0]["pod"], ru[1]["entity"]))
            slowest = slowest_u["activity"]
            if median >= IDLE_THRESHOLD and slowest < STRAGGLER_FRACTION * median:
                waste = sum(max(0.0, 1.0 - slowest / u["activity"]) * u["allocated"]
                            for _r, u in units if u is not slowest_u and u["activity"] > 0)
                flagged[h] = {"slowest": (slowest_r, slowest_u), "waste": waste,
                              "row": {"hour": h, "slowest": slowest, "median": median, "fastest": max(acts),
                                      "units": len(units)}}
        for run in _runs(sorted(flagged), STRAGGLER_MIN_HOURS):
            r, u = flagged[run[0]]["slowest"]
            ent = sc.entities[u["entity"]]
            rows = [flagged[h]["row"] for h in run]
            out["straggler"].append(_finding(
                sc, "straggler", run, last_hour, team=r["team"], namespace=namespace, workload=workload,
                pod=r["pod"], node=r["node"], gpu_uuid=ent.uuid, gpu_instance_id=ent.gi_id or "",
                gpu_model=_model(sc, r["node"]), gpu_hours=sum(flagged[h]["waste"] for h in run),
                detail={"min_ratio": min(x["slowest"] / x["median"] for x in rows), "per_hour": rows},
            ))

    # ---- unattributed activity
    for ent in sc.entities:
        if ent.mig_parent or sc.node_by_name[ent.node].kind in ("dra", "hami"):
            continue
        flagged = {}
        for h in hours:
            ha, hb = h.timestamp(), h.timestamp() + 3600
            if sc.node_by_name[ent.node].created > ha:
                continue
            if any(s < hb and e > ha for s, e, *_ in ent.intervals):
                continue  # some pod holds it (ghost and lost-label holders included)
            avg = cache.average(ent.idx, ha, hb, key="sm")
            if avg is not None and avg > UNATTRIBUTED_THRESHOLD:
                flagged[h] = avg
        share = ent.slices / 7.0 if ent.profile else 1.0
        for run in _runs(sorted(flagged)):
            acts = [flagged[h] for h in run]
            out["unattributed_activity"].append(_finding(
                sc, "unattributed_activity", run, last_hour, node=ent.node, gpu_uuid=ent.uuid,
                gpu_instance_id=ent.gi_id or "", gpu_model=_model(sc, ent.node), gpu_hours=len(run) * share,
                detail={"working_gpu_hours": sum(acts) * share, "activity": sum(acts) / len(acts)},
            ))

    # ---- idle-held
    per_pod: dict = {}
    for r in led.pod_hours:
        measured = [u for u in r["units"] if u["activity"] is not None]
        if not measured:
            continue
        activity = r["working"] / (r["allocated"] - r["unmeasured"])
        fb = max(cache.average(u["entity"], u["from"], u["to"], key="fb_used") or 0.0 for u in measured)
        if activity < IDLE_THRESHOLD and fb > IDLE_HELD_FB_MIB:
            per_pod.setdefault((r["namespace"], r["pod"]), {})[r["hour"]] = (r, activity, fb)
    for (namespace, name), per_hour in sorted(per_pod.items()):
        for run in _runs(sorted(per_hour), IDLE_MIN_HOURS):
            rows = [per_hour[h] for h in run]
            r = rows[0][0]
            pod = by_pod[(namespace, name)]
            ent = sc.entities[pod.units[0].entity]
            out["idle_held"].append(_finding(
                sc, "idle_held", run, last_hour, team=r["team"], namespace=namespace, workload=r["workload"],
                pod=name, node=r["node"], gpu_uuid=ent.uuid, gpu_instance_id=ent.gi_id or "",
                gpu_model=_model(sc, r["node"]), gpu_hours=sum(x[0]["allocated"] for x in rows),
                detail={"fb_used_mib": max(x[2] for x in rows), "activity": max(x[1] for x in rows)},
            ))
    out.update(accelerator_findings(sc, led, hours, last_hour))
    for findings in out.values():
        findings.sort(key=lambda f: (f["start"], f["node"] or "", f["gpu_uuid"] or "", f["pod"] or "",
                                     f["reason"] or ""))
    return out
