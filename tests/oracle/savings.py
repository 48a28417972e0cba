"""The savings of a window by brute force from the scenario model (docs/savings.md), independent of product code.

* stop_idle: per workload (namespace, ``expected_workload``), the pod-hours whose measured activity is below
  ``IDLE_THRESHOLD`` in runs of at least ``IDLE_MIN_HOURS`` consecutive hours of one pod; dollars = their
  allocated GPU-hours x the model's price;
* right_size: a workload none of whose hours is such an idle run, every pod of it holding one unit (a whole GPU or
  one MIG instance) of a MIG-capable model, measured at least ``RIGHT_SIZE_MIN_HOURS`` pod-hours: its peak hourly
  activity (share of the unit) x unit slices / 7 x (1 + headroom), rounded up to slices, and its peak hourly
  framebuffer (the time-average of ``fb_used`` over the held part of each hour) x (1 + headroom), against the
  NVIDIA profile table (nominal GB x 1024 x 0.95 usable); the smallest profile fitting both, when it has fewer
  slices than the unit; dollars = the workload's charge in the window x (1 - target slices / unit slices);
* cheaper_model: such a workload on one whole GPU (device plugin) whose peak activity x its model's dense FP16/BF16
  TFLOPS x (1 + headroom) and peak framebuffer x (1 + headroom) fit a model priced lower that a plain whole-GPU
  node of the scenario has (NVIDIA's datasheet figures, below); the cheapest such model; dollars = (price of the
  model - price of the target) x the workload's allocated GPU-hours in the window. When both fit, the one with more
  dollars is the action.
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


# One whole GPU of the demo's models: (dense FP16/BF16 Tensor Core TFLOPS, framebuffer MiB), from NVIDIA's datasheets
# (H100 SXM 1,979 with sparsity, A100 624, L4 242: half of each) and what nvidia-smi reports.
CAPABILITY = {"NVIDIA-H100-80GB-HBM3": (989.0, 81559), "NVIDIA-A100-SXM4-80GB": (312.0, 81920),
              "NVIDIA-L4": (121.0, 23034), "NVIDIA-L40S": (362.0, 46068)}


def _cheaper_model(sc: Scenario, model: str, peak_act: float, peak_fb: float, prices: dict) -> str | None:
    """The cheapest model priced below `model` that a plain whole-GPU node of the scenario has and whose GPU holds
    the peaks plus headroom."""
    tflops = CAPABILITY[model][0]
    fleet = {gpu_model(n) for n in sc.nodes if n.kind == "whole" and n.unschedulable_from is None}
    fits = [(prices[m], -CAPABILITY[m][0], m) for m in fleet
            if m in prices and m in CAPABILITY and prices[m] < prices[model]
            and peak_act * tflops * (1 + HEADROOM) <= CAPABILITY[m][0] and peak_fb * (1 + HEADROOM) <= CAPABILITY[m][1]]
    return min(fits)[2] if fits else None


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
        whole = ent.profile is None and rows[0]["allocation_mode"] == "device_plugin" and model in CAPABILITY
        if not (table or whole) or rows[0]["allocation_mode"] not in ("device_plugin", "mig") or ent.replicas:
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
        allocated = sum(r["allocated"] for r in rows)
        candidates = []
        slices = max(1, math.ceil(round(peak_act * current / 7 * (1 + HEADROOM) * 7, 9)))
        memory = peak_fb * (1 + HEADROOM)
        fits = [(s, gb, name) for name, (s, gb) in table.items() if s >= slices and gb * 1024 * 0.95 >= memory]
        if fits and min(fits)[0] < current:
            target_slices, _gb, target = min(fits)
            candidates.append({"action": "right_size", "target": target, "team": rows[0]["team"],
                               "dollars": allocated * float(prices[model]) * (1 - target_slices / current)})
        to = _cheaper_model(sc, model, peak_act, peak_fb, prices) if whole else None
        if to is not None:
            candidates.append({"action": "cheaper_model", "target": to, "team": rows[0]["team"],
                               "dollars": allocated * float(prices[model] - prices[to])})
        if candidates:
            best = max(candidates, key=lambda c: c["dollars"])
            others = [c for c in candidates if c is not best]
            out[key] = {**best, "alternative": others[0] if others else None}
    return out
