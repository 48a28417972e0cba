"""The report e-mail: rendered from an edition's stored figures (so any sent report can be rendered again,
byte for byte), HTML with a plain-text part carrying the same figures, the CSV and FOCUS files attached
base64-encoded (the bytes received are the bytes hashed), and a List-Unsubscribe header (RFC 2369, one-click
RFC 8058) with a signed link.

Templates: templates/emails/report-subject.txt, report-body.txt (autoescape off: plain text is never
HTML-escaped) and report-body.html.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email import encoders
from email.mime.base import MIMEBase
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.utils.dateparse import parse_datetime

from apps.reports import tokens
from apps.reports.content import links
from apps.reports.formats import gpuh, pct, ratio_pct, signed_pct, signed_usd, usd
from apps.reports.models import ReportEdition, ReportSubscription
from apps.reports.periods import parse_period


@dataclass(frozen=True)
class RenderedEmail:
    subject: str
    text: str
    html: str
    headers: dict[str, str]


def _bounds(figures: dict[str, Any]) -> tuple[datetime, datetime]:
    start, end = parse_datetime(figures["start"]), parse_datetime(figures["end"])
    if start is None or end is None:
        raise ValueError(f"an edition's period is not two times: {figures['start']!r}, {figures['end']!r}")
    return start, end


def _notes(row: dict[str, Any]) -> str:
    notes = []
    if row.get("unpriced_gpu_hours"):
        notes.append(f"{row['unpriced_gpu_hours']:,.1f} GPU-h unpriced (cost unknown)")
    return "; ".join(notes)


def average_label(figures: dict[str, Any]) -> str:
    """`vs 4-wk avg`, or fewer when fewer earlier periods have data."""
    count = figures["average"]["count"] or figures["average"]["of"]
    return f"vs {count}-{'wk' if figures['kind'] == 'weekly' else 'mo'} avg"


def cost_cell(printed: str, unpriced_only: bool | None) -> str:
    """A printed cost, or "unpriced" when all of its hours are on GPU models without a price (never $0)."""
    return "unpriced" if unpriced_only else usd(printed)


def _change(delta: str | None, percent: str | None) -> str:
    if delta is None:
        return "—"
    return f"{signed_usd(delta)} ({signed_pct(percent)})" if percent else signed_usd(delta)


def text_table(figures: dict[str, Any]) -> list[str]:
    """The per-team table as fixed-width lines for the plain-text part (same figures as the HTML table)."""
    header = ["Team", "Cost (USD)", "Share", f"vs {figures['previous']['period']}", average_label(figures),
              "GPU-h", "Idle %", "Infra loss", "Notes"]
    body = []
    for r in [*figures["rows"], figures["total_row"]]:
        cost = cost_cell(r["cost_printed"], r.get("unpriced_only"))
        unpriced = cost == "unpriced"
        loss = r.get("infra_loss_printed")
        body.append([
            r["name"], cost, "—" if unpriced else pct(r["share"]),
            "—" if unpriced else _change(r["delta"], r["delta_pct"]),
            "" if r is figures["total_row"] else "—" if unpriced else _change(r["avg_delta"], r["avg_delta_pct"]),
            gpuh(r["gpu_hours_printed"]), pct(r.get("idle_pct")), "—" if loss is None else usd(loss), _notes(r),
        ])
    widths = [max(len(str(row[i])) for row in [header, *body]) for i in range(len(header))]
    lines = []
    for n, row in enumerate([header, *body]):
        cells = [row[0].ljust(widths[0])] + [str(c).rjust(widths[i]) for i, c in enumerate(row[1:-1], start=1)]
        line = "  ".join(cells) + ("  " + row[-1] if row[-1] else "")
        if n == len(body):  # the totals row gets a rule above it
            lines.append("-" * len("  ".join(cells)))
        lines.append(line.rstrip())
    return lines


def _align(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(len(r) for r in rows))]
    return ["  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)).rstrip()
            for r in rows]


def text_headline(f: dict[str, Any]) -> list[str]:
    """The headline block as aligned lines."""
    h = f["headline"]
    rows: list[list[str]] = []
    if f["scope"]["fleet"]:
        rows.append(["GPU capacity cost", usd(h["capacity_cost_printed"]), "",
                     f"({gpuh(h['capacity_gpu_hours_printed'])} GPU-h)"])
        rows.append(["Charged to teams", usd(h["charged_printed"]), pct(h["charged_share"]),
                     f"({gpuh(h['charged_gpu_hours_printed'])} GPU-h allocated)"])
        rows.append(["  of which idle in allocations", usd(h["idle_cost_printed"]), "",
                     f"({pct(h['idle_share_of_charged'])} of charged)"])
        rows.append(["Unallocated capacity (platform)", usd(h["unallocated_printed"]), pct(h["unallocated_share"]),
                     f"({gpuh(h['unallocated_gpu_hours_printed'])} GPU-h)"])
    else:
        rows.append([f"Charged to {f['scope']['label']}", usd(h["charged_printed"]), "",
                     f"({gpuh(h['charged_gpu_hours_printed'])} GPU-h allocated)"])
        rows.append(["  of which idle in allocations", usd(h["idle_cost_printed"]), "",
                     f"({pct(h['idle_share_of_charged'])} of charged)"])
    lines = _align(rows, {1, 2})
    lines += infra_loss_lines(h)
    if f["scope"]["fleet"]:
        mark = "OK" if h["reconciles"] else "MISMATCH"
        lines.append(f"Check: charged + unallocated = capacity cost: {usd(h['charged_printed'])} + "
                     f"{usd(h['unallocated_printed'])} = {usd(h['capacity_cost_printed'])}  {mark} "
                     f"(ledger difference {usd(h['reconciliation_diff'])})")
    total = f["total_row"]
    compare = []
    if total["delta"] is not None:
        compare.append(f"vs {f['previous']['period']} {_change(total['delta'], total['delta_pct'])}")
    if total["avg_delta"] is not None:
        compare.append(f"vs {f['average']['count']}-{'week' if f['kind'] == 'weekly' else 'month'} average "
                       f"{_change(total['avg_delta'], total['avg_delta_pct'])}")
    if compare:
        lines.append(" · ".join(compare))
    return lines


def infra_loss_lines(h: dict[str, Any]) -> list[str]:
    """The infra-loss line (editions made before findings existed have none)."""
    if h.get("infra_loss_printed") is None:
        return []
    line = (f"Infra loss: {usd(h['infra_loss_printed'])} ({h['infra_loss_gpu_hours']:,.1f} GPU-h) charged for GPUs "
            "while they were unhealthy (XID, throttling, row remapping, ECC, vanished)")
    if h.get("infra_loss_credited"):
        return [line + "; credited back:", f"  charged net of infra loss: {usd(h['net_charged_printed'])}"]
    return [line + "; shown, not credited"]


def text_movers(f: dict[str, Any]) -> list[str]:
    rows = [[m["name"], _change(m["delta"], m["delta_pct"]),
             f"{usd(m['prev_printed'])} -> {usd(m['cost_printed'])}"] for m in f["movers"]]
    return _align(rows, {1}) if rows else []


def text_idle(f: dict[str, Any]) -> list[str]:
    rows = [[f"{r['namespace']}/{r['name']}", f"({r['team']}, {r['cluster']})",
             cost_cell(r["idle_cost_printed"], r.get("unpriced_only")),
             f"{gpuh(r['idle_gpu_hours_printed'])} GPU-h idle", f"{pct(r['idle_pct'])} of its allocation"]
            for r in f["top_idle"]["rows"]]
    return _align(rows, {2, 3}) if rows else []


def text_restatement(f: dict[str, Any]) -> list[str]:
    r = f.get("restatement")
    if not r:
        return []
    rows = [[c["name"], f"{usd(c['old_cost'])} -> {usd(c['new_cost'])}", signed_usd(c["delta"]),
             f"{gpuh(c['old_gpu_hours'])} -> {gpuh(c['new_gpu_hours'])} GPU-h"] for c in r["rows"]]
    rows.append(["Total", f"{usd(r['old_total'])} -> {usd(r['new_total'])}", signed_usd(r["delta_total"]), ""])
    return _align(rows, {1, 2})


def text_billed(f: dict[str, Any]) -> list[str]:
    """The period in the billed basis, team by team (docs/billing.md), or nothing without a bill."""
    b = f.get("billed")
    if not b:
        return []
    rows = [[r["name"], usd(r["cost_printed"]),
             f"{gpuh(r['unbilled_gpu_hours'])} GPU-h not on the bill" if r["unbilled_gpu_hours"] else ""]
            for r in b["rows"]]
    rows.append(["Total", usd(b["total_printed"]), ""])
    return _align(rows, {1})


def text_reconciliation(f: dict[str, Any]) -> list[str]:
    """The month's price card against its cloud bill, per cluster (monthly fleet editions with a bill)."""
    r = f.get("reconciliation")
    if not r:
        return []
    rows = [[c["cluster"], f"card {usd(c['price_card_cost'])}", f"bill {usd(c['billed_cost'])}",
             f"variance {signed_usd(c['variance'])}",
             f"({ratio_pct(c['variance_share'])})" if c["variance_share"] is not None else "",
             f"{len(c['nodes_without_bill'])} GPU node(s) without bill line" if c["nodes_without_bill"] else ""]
            for c in r["clusters"]]
    return _align(rows, {1, 2, 3})


def text_forecast(f: dict[str, Any]) -> list[str]:
    """Where the month in progress is heading (monthly editions): spent so far, the forecast and its range."""
    fc = f.get("forecast")
    if not fc:
        return []
    if not fc["history_days"]:
        return [f"{fc['period']}: {usd(fc['actual'])} spent so far; no whole day of history yet to forecast from."]
    return [f"{fc['period']}: {usd(fc['actual'])} spent so far, forecast {usd(fc['expected'])} at the end of the "
            f"month (range {usd(fc['low'])} to {usd(fc['high'])});",
            f"run rate {usd(fc['run_rate_per_day'])} a day (the mean of the last 7 days of history, or fewer); weekly "
            f"pattern and range from {fc['history_days']} days of history, the range as wide as the method's own "
            "past errors."]


def text_billed_restatement(f: dict[str, Any]) -> list[str]:
    r = (f.get("restatement") or {}).get("billed")
    if not r:
        return []
    def was(value: str | None) -> str:
        return "none" if value is None else usd(value)

    rows = [[c["name"], f"{was(c['old_cost'])} -> {was(c['new_cost'])}", signed_usd(c["delta"])] for c in r["rows"]]
    rows.append(["Total", f"{was(r['old_total'])} -> {was(r['new_total'])}", signed_usd(r["delta_total"])])
    return _align(rows, {1, 2})


def context(edition: ReportEdition, subscription: ReportSubscription | None = None) -> dict[str, Any]:
    f = edition.figures
    start, end = _bounds(f)
    period = parse_period(f["period"])
    ctx: dict[str, Any] = {
        "f": f, "h": f["headline"], "edition": edition, "status": edition.status,
        "status_upper": edition.status.upper(), "version": edition.version, "start": start, "end": end,
        "csv_name": edition.csv_name, "focus_name": edition.focus_name,
        "csv_sha256": edition.csv_sha256, "focus_sha256": edition.focus_sha256,
        "csv_attached": attached(edition.csv_bytes), "focus_attached": attached(edition.focus_bytes),
        "csv_megabytes": f"{len(edition.csv_bytes) / 1e6:.1f}",
        "focus_megabytes": f"{len(edition.focus_bytes) / 1e6:.1f}",
        "links": links(period, edition.scope, edition.version), "text_table": text_table(f),
        "text_headline": text_headline(f), "text_movers": text_movers(f), "text_idle": text_idle(f),
        "text_restatement": text_restatement(f), "text_billed": text_billed(f),
        "text_billed_restatement": text_billed_restatement(f), "text_reconciliation": text_reconciliation(f),
        "text_forecast": text_forecast(f), "forecast": f.get("forecast"),
        "reconciliation": f.get("reconciliation"), "billed": f.get("billed"), "noun": period.noun,
        "average_label": average_label(f),
        "restatement": f.get("restatement"), "unsubscribe_url": None,
        "coverage": f["coverage"], "scope_label": f["scope"]["label"], "fleet": f["scope"]["fleet"],
    }
    if subscription is not None:
        ctx["unsubscribe_url"] = tokens.unsubscribe_url(subscription)
        ctx["cadence"] = subscription.cadence
    return ctx


def render(edition: ReportEdition, subscription: ReportSubscription | None = None) -> RenderedEmail:
    """The e-mail for `edition` as `subscription` gets it (deterministic: the archive can render it again)."""
    ctx = context(edition, subscription)
    subject = " ".join(render_to_string("emails/report-subject.txt", ctx).split())
    headers: dict[str, str] = {}
    if ctx["unsubscribe_url"]:
        headers["List-Unsubscribe"] = f"<{ctx['unsubscribe_url']}>"
        headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    return RenderedEmail(subject, render_to_string("emails/report-body.txt", ctx),
                         render_to_string("emails/report-body.html", ctx), headers)


def attachment(filename: str, content: bytes) -> MIMEBase:
    """A CSV attachment, base64-encoded: CRLF line endings and every byte arrive as they were hashed."""
    part = MIMEBase("text", "csv", charset="utf-8")
    part.set_payload(content)
    encoders.encode_base64(part)
    part.add_header("Content-Disposition", "attachment", filename=filename)
    return part


def message(edition: ReportEdition, subscription: ReportSubscription, recipient: str,
            rendered: RenderedEmail | None = None) -> EmailMultiAlternatives:
    rendered = rendered or render(edition, subscription)
    msg = EmailMultiAlternatives(rendered.subject, rendered.text, settings.DEFAULT_FROM_EMAIL, [recipient],
                                 headers=dict(rendered.headers))
    msg.attach_alternative(rendered.html, "text/html")
    for name, data in ((edition.csv_name, bytes(edition.csv_bytes)), (edition.focus_name, bytes(edition.focus_bytes))):
        if attached(data):
            msg.attach(attachment(name, data))
    return msg


def attached(data: bytes | memoryview) -> bool:
    """Files up to GPUFINOPS_REPORT_MAX_ATTACHMENT_BYTES go with the e-mail; larger ones stay in the archive."""
    return len(data) <= settings.GPUFINOPS_REPORT_MAX_ATTACHMENT_BYTES
