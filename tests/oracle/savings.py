"""The savings of a window by brute force from the scenario model (docs/savings.md), independent of product code.

* stop_idle: per workload (namespace, ``expected_workload``), the pod-hours whose measured activity is below
  ``IDLE_THRESHOLD`` in runs of at least ``IDLE_MIN_HOURS`` consecutive hours of one pod; dollars = their
  allocated GPU-hours x the model's price;
* right_size: a workload none of whose hours is such an idle run, every pod of it holding one unit (a whole GPU or
  one MIG instance) of a MIG-capable model, measured at least ``RIGHT_SIZE_MIN_HOURS`` pod-hours: its peak hourly
  activity (share of the unit) x unit slices / 7 x (1 + headroom), rounded up to slices, and its peak hourly
  framebuffer (the time-average of ``fb_used`` over the held part of each hour) x (1 + headroom), against the
  NVIDIA profile table (nominal GB x 1024 x 0.95 usable); the smallest profile fitting both, when it has fewer
  slices than the unit; dollars = the workload's charge in the window x (1 - target slices / unit slices).
Per month = dollars x 720 / window hours.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime

from devtools.simulator.model import Scenario

from .flagging import IDLE_MIN_HOURS, IDLE_THRESHOLD, runs
from .ledger import expected_ledger, gpu_model

HEADROOM = 0.2
RIGHT_SIZE_MIN_HOURS = 12
# NVIDIA's MIG profiles (GPU Operator state-mig-manager; MIG user guide): name -> (slices, nominal GB)
PROFILES_80GB = {"1g.10gb": (1, 10), "1g.20gb": (1, 20), "2g.20gb": (2, 20), "3g.40gb": (3, 40), "4g.40gb": (4, 40),
                 "7g.80gb": (7, 80)}


def _profiles(model: str) -> dict:
    return PROFILES_80GB if ("H100" in model or ("A100" in model and "80GB" in model)) else {}


def expected_savings(sc: Scenario, start: datetime, end: datetime, prices: dict) -> dict[tuple[str, str], dict]:
    """(namespace, workload) -> {"action", "dollars", "target" (right_size), "team"}."""
    led = expected_ledger(sc, start, end)
    nodes = {n.name: n for n in sc.nodes}
    by_pod: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in led.pod_hours:
        by_pod[(r["namespace"], r["pod"])].append(r)
    out: dict[tuple[str, str], dict] = {}
    idle_workloads: set[tuple[str, str]] = set()
    for (ns, _pod), rows in by_pod.items():
        rows.sort(key=lambda r: r["hour"])
        idle = [r["hour"] for r in rows if r["allocated"] - r["unmeasured"] > 0
                and r["working"] / (r["allocated"] - r["unmeasured"]) < IDLE_THRESHOLD]
        listed = {h for run in runs(idle, IDLE_MIN_HOURS) for h in run}
        if not listed:
            continue
        key = (ns, rows[0]["workload"])
        price = prices[gpu_model(nodes[rows[0]["node"]])]
        e = out.setdefault(key, {"action": "stop_idle", "dollars": 0.0, "team": rows[0]["team"]})
        e["dollars"] += sum(r["allocated"] for r in rows if r["hour"] in listed) * float(price)
        idle_workloads.add(key)
    by_workload: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in led.pod_hours:
        by_workload[(r["namespace"], r["workload"])].append(r)
    for key, rows in by_workload.items():
        if key in idle_workloads or any(len(r["units"]) != 1 for r in rows):
            continue
        model = gpu_model(nodes[rows[0]["node"]])
        table = _profiles(model)
        ent = sc.entities[rows[0]["units"][0]["entity"]]
        if not table or rows[0]["allocation_mode"] not in ("device_plugin", "mig") or ent.replicas:
            continue
        current = int(ent.profile.split("g.")[0]) if ent.profile else 7
        peak_act = peak_fb = 0.0
        measured = 0
        for r in rows:
            u = r["units"][0]
            if u["activity"] is None:
                continue
            fb = led.cache.average(u["entity"], u["from"], u["to"], key="fb_used")
            if fb is None:
                continue
            measured += 1
            peak_act, peak_fb = max(peak_act, u["activity"]), max(peak_fb, fb)
        if measured < RIGHT_SIZE_MIN_HOURS:
            continue
        slices = max(1, math.ceil(round(peak_act * current / 7 * (1 + HEADROOM) * 7, 9)))
        memory = peak_fb * (1 + HEADROOM)
        fits = [(s, gb, name) for name, (s, gb) in table.items() if s >= slices and gb * 1024 * 0.95 >= memory]
        if not fits or min(fits)[0] >= current:
            continue
        target_slices, _gb, target = min(fits)
        charge = sum(r["allocated"] for r in rows) * float(prices[model])
        out[key] = {"action": "right_size", "target": target, "team": rows[0]["team"],
                    "dollars": charge * (1 - target_slices / current)}
    return out
