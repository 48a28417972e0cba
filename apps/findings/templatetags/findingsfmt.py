"""Formats of the findings page, e-mails and counts include: USD at 2 dp and GPU-hours at 1 dp with thousands
separators, times ISO 8601 UTC, and one line of detail per kind."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from django import template
from django.urls import NoReverseMatch, reverse

from apps.findings.models import Finding

register = template.Library()


@register.filter
def workload_link(f: Finding) -> str:
    """The dashboard's workload page when it has one, else the usage API for that workload's pods."""
    if f.workload and f.namespace:
        try:
            return reverse("dashboard:workload", args=[f.cluster.name, f.namespace, f.workload])
        except NoReverseMatch:
            pass
        return (f"/api/v1/usage/?group_by=pod&cluster={f.cluster.name}&namespace={f.namespace}"
                f"&workload={f.workload}&start={f.start:%Y-%m-%dT%H:00:00Z}")
    return ""


@register.filter
def usd(value) -> str:
    if value is None or value == "":
        return "—"
    return f"{Decimal(str(value)).quantize(Decimal('0.01'), rounding=ROUND_HALF_EVEN):,}"


@register.filter
def gpuh(value) -> str:
    if value is None or value == "":
        return "—"
    return f"{float(value):,.1f}"


@register.filter
def pct(value) -> str:
    return "—" if value is None else f"{float(value):.1%}"


@register.filter
def utc(value) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M")


@register.filter
def kind_label(kind: str) -> str:
    return str(kind).replace("_", " ")


@register.filter
def summary(f) -> str:
    """One line about a finding's detail (the API has all of it)."""
    d = f.detail or {}
    if f.kind in ("idle_allocation", "idle_held"):
        line = f"activity {float(d.get('activity', 0)):.1%}"
        if "fb_used_mib" in d:
            line += f", {float(d['fb_used_mib']):,.0f} MiB of framebuffer in use"
        return line
    if f.kind == "straggler":
        return (f"slowest GPU {d.get('slowest_gpu', '')} at {float(d.get('slowest', 0)):.0%} vs median "
                f"{float(d.get('median', 0)):.0%} ({d.get('units', '?')} GPUs)")
    if f.kind == "unhealthy_gpu":
        reason = d.get("reason", "")
        extra = {"xid": lambda: "XID " + ", ".join(str(c) for c in d.get("xid_codes", [])),
                 "throttle": lambda: "throttled: " + ", ".join(d.get("reasons", [])),
                 "remap": lambda: "row remap failed" if d.get("row_remap_failure") else "rows remapped",
                 "ecc": lambda: f"{d.get('ecc_dbe', 0):g} double-bit ECC errors",
                 "vanished": lambda: "no DCGM series while its node is up"}.get(reason, lambda: reason)()
        return f"{extra}; infra loss {float(f.allocated_gpu_hours):,.1f} GPU-h held"
    if f.kind == "unattributed_activity":
        return f"activity {float(d.get('activity', 0)):.0%} with no pod holding it"
    if f.kind == "zero_allocatable_node":
        return f"{d.get('physical_gpus', '?')} GPUs, none allocatable (device plugin not registered?)"
    if f.kind == "borrowed_idle":
        return f"borrowed {float(d.get('borrowed_gpu_hours', 0)):,.1f} GPU-h while idle"
    if f.kind == "missing_signal":
        return f"{d.get('reason', '')}: {d.get('fix', '')}"
    if f.kind == "idle_claim":
        return (f"claim {d.get('claim', '')} holds {len(d.get('devices', []))} device(s) with no pod consuming it; "
                f"delete it or run its work")
    if f.kind == "oversubscribed_gpu":
        return (f"HAMi tenants' shares add up to {float(d.get('max_share_sum', 0)):.0%} of the GPU; each is billed "
                f"scaled down ({len(d.get('tenants', []))} tenants)")
    if f.kind == "missing_attribution":
        return (f"{float(d.get('unmeasured_gpu_hours', 0)):,.1f} GPU-h of DRA devices unmeasured: dcgm-exporter "
                f"lacks DRA attribution; {d.get('fix', '')}")
    if f.kind == "team_label_rejected" and d.get("reason") == "other_team":
        return (f"label {d.get('label', '')!r} names another team than its namespace's; "
                f"charged to {d.get('charged_to', '')}")
    if f.kind == "team_label_rejected":
        return f"label {d.get('label', '')!r} not obeyed ({d.get('reason', '')}); charged to {d.get('charged_to', '')}"
    return ""
