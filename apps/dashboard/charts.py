"""Pure functions: rows in, Plotly figures out (plain dicts, drawn by static/js/charts.js with plotly.min.js).

Kept free of Django and queries so each chart can be tested with plain lists. One look for every chart
(reference §4.1, §4.6): the Okabe-Ito colour-blind-safe palette in a fixed order, the two kinds of idle in
grey with a pattern (never colour alone), units in every hover text, thousands separators, ISO dates (UTC),
the legend above the plot, no Plotly logo, and a PNG download named after the chart.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

# Okabe & Ito (2008), yellow last (too pale on white).
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999999", "#F0E442"]
# What each quantity looks like everywhere: colour, pattern (so print and colour-blind readers can tell them
# apart), and the name shown in legends and tables.
STYLES: dict[str, dict[str, str]] = {
    "working": {"color": "#0072B2", "pattern": "", "name": "Working"},
    "idle": {"color": "#8C8C8C", "pattern": "/", "name": "Idle in allocations"},
    "unmeasured": {"color": "#E69F00", "pattern": ".", "name": "Unmeasured"},
    "unallocated": {"color": "#CFCFCF", "pattern": "x", "name": "Unallocated capacity"},
    "cost_other": {"color": "#0072B2", "pattern": "", "name": "Working"},
    "cost_other_unmeasured": {"color": "#0072B2", "pattern": "", "name": "Working or unmeasured"},
    "cost": {"color": "#0072B2", "pattern": "", "name": "Charged to the team"},
    "waited": {"color": "#D55E00", "pattern": "", "name": "GPU-hours waited (pending)"},
    "nominal": {"color": "#000000", "pattern": "", "name": "Nominal quota"},
    "reserved": {"color": "#0072B2", "pattern": "", "name": "Reserved"},
    "borrowed": {"color": "#E69F00", "pattern": "", "name": "Borrowed from the cohort"},
}
SIGNAL_STYLES = {
    "sm_active": {"color": "#0072B2", "dash": "solid", "name": "SM active"},
    "gr_engine_active": {"color": "#009E73", "dash": "dot", "name": "GR engine active"},
    "tensor_active": {"color": "#CC79A7", "dash": "dashdot", "name": "Tensor active"},
    "gpu_util": {"color": "#D55E00", "dash": "dash", "name": "GPU_UTIL (naive)"},
}
UNITS = {"gpuh": ("", " GPU-hours", ",.1f"), "usd": ("$", "", ",.2f"), "gpus": ("", " GPUs", ",.2f"),
         "pct": ("", "", ".1%")}
FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'


def label(text: object) -> str:
    """A tenant-written name as chart text. Plotly renders a subset of HTML in labels, legends and hover text
    (`<a href>` becomes a link): entities keep `<`, `>` and `&` plain text, shown as written, never markup."""
    return html.escape(str(text), quote=False)


def _num(value: Any) -> float | None:
    """A JSON number for Plotly (exact decimals become floats only here, for drawing)."""
    if value is None:
        return None
    return float(value) if isinstance(value, Decimal | int | float) else value


def _hover(unit: str, axis: str = "y") -> str:
    prefix, suffix, fmt = UNITS[unit]
    other = "x" if axis == "y" else "y"
    return f"%{{fullData.name}}<br>%{{{other}}}: {prefix}%{{{axis}:{fmt}}}{suffix}<extra></extra>"


def _axis_title(unit: str, title: str) -> dict:
    prefix = UNITS[unit][0]
    return {"title": {"text": title}, "tickformat": ".0%" if unit == "pct" else ",.2~f", "tickprefix": prefix,
            "gridcolor": "#e5e5e5", "zerolinecolor": "#bdbdbd", "rangemode": "tozero"}


def layout(**overrides: Any) -> dict:
    """The one look of every chart; `overrides` are merged on top."""
    base = {
        "font": {"family": FONT, "size": 13, "color": "#1d2330"},
        "separators": ".,",
        "colorway": OKABE_ITO,
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#ffffff",
        "margin": {"l": 64, "r": 16, "t": 64, "b": 48},
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "xanchor": "left", "yanchor": "bottom"},
        "height": 320,
        "hoverlabel": {"namelength": -1},
    }
    base.update(overrides)
    return base


def figure(name: str, data: list[dict], lay: dict) -> dict:
    return {"data": data, "layout": lay,
            "config": {"displaylogo": False, "responsive": True,
                       "toImageButtonOptions": {"filename": name, "format": "png"}}}


def _x_axis(x_type: str) -> dict:
    if x_type == "date":
        return {"type": "date", "tickformat": "%m-%d\n%Y", "hoverformat": "%Y-%m-%d %H:%M UTC", "gridcolor": "#f0f0f0",
                "tickangle": 0}
    return {"type": "category", "automargin": True}


def bar_trace(kind: str, x: Sequence, y: Sequence, unit: str, *, name: str | None = None,
              orientation: str = "v") -> dict:
    style = STYLES[kind]
    marker: dict[str, Any] = {"color": style["color"], "line": {"color": "#4d4d4d", "width": 0.5}}
    if style["pattern"]:
        marker["pattern"] = {"shape": style["pattern"], "fgcolor": "#333333", "size": 6, "solidity": 0.25}
    values = [_num(v) for v in y]
    trace: dict[str, Any] = {"type": "bar", "name": name or style["name"], "marker": marker, "orientation": orientation}
    if orientation == "h":
        trace.update(y=list(x), x=values, hovertemplate=_hover(unit, "x"))
    else:
        trace.update(x=list(x), y=values, hovertemplate=_hover(unit, "y"))
    return trace


def stacked_bars(name: str, x: Sequence, series: Sequence[tuple[str, Sequence]], *, unit: str, y_title: str,
                 x_type: str = "date", height: int = 320) -> dict:
    """Bars stacked per x: `series` is [(style key, values)], drawn bottom-up in that order."""
    data = [bar_trace(kind, x, values, unit) for kind, values in series]
    return figure(name, data, layout(barmode="stack", height=height, xaxis=_x_axis(x_type),
                                     yaxis=_axis_title(unit, y_title)))


def hours_split(name: str, rows: Sequence[Mapping[str, Any]], x_key: str = "t", *, x_type: str = "date") -> dict:
    """GPU-hours per bucket: working, idle in allocations, unmeasured (they add up to allocated)."""
    x = [r[x_key] for r in rows]
    series = [(k, [r[f"{k}_gpu_hours"] for r in rows]) for k in ("working", "idle", "unmeasured")]
    return stacked_bars(name, x, series, unit="gpuh", y_title="GPU-hours", x_type=x_type)


def cost_split(name: str, rows: Sequence[Mapping[str, Any]], x_key: str = "t", *, x_type: str = "date") -> dict:
    """Cost per bucket: idle in allocations (exact, the ledger's idle cost) under the rest of the cost; the rest
    is named "working or unmeasured" when any hour of the chart was unmeasured (its cost is not split)."""
    x = [r[x_key] for r in rows]
    unmeasured = any(r.get("unmeasured_gpu_hours") for r in rows)
    rest = [Decimal(r["cost"]) - Decimal(r["idle_cost"]) for r in rows]
    series = [("cost_other_unmeasured" if unmeasured else "cost_other", rest), ("idle", [r["idle_cost"] for r in rows])]
    return stacked_bars(name, x, series, unit="usd", y_title="USD", x_type=x_type)


def capacity_split(name: str, rows: Sequence[Mapping[str, Any]], x_key: str = "t") -> dict:
    """Capacity GPU-hours per bucket: working, idle in allocations, unmeasured, unallocated capacity."""
    x = [r[x_key] for r in rows]
    series = [(k, [r[f"{k}_gpu_hours"] for r in rows]) for k in ("working", "idle", "unmeasured", "unallocated")]
    return stacked_bars(name, x, series, unit="gpuh", y_title="GPU-hours")


def signal_lines(name: str, x: Sequence, by_signal: Mapping[str, Sequence[float | None]]) -> dict:
    """Activity (working share of measured GPU-hours) per signal on a 0-100 % axis; gaps where unmeasured."""
    data = []
    for signal, values in by_signal.items():
        style = SIGNAL_STYLES[signal]
        data.append({"type": "scatter", "mode": "lines+markers" if len(x) <= 48 else "lines", "name": style["name"],
                     "x": list(x), "y": [_num(v) for v in values], "connectgaps": False,
                     "line": {"color": style["color"], "dash": style["dash"], "width": 2},
                     "hovertemplate": _hover("pct")})
    yaxis = {**_axis_title("pct", "Activity (working share)"), "range": [0, 1.02]}
    return figure(name, data, layout(xaxis=_x_axis("date"), yaxis=yaxis, height=300))


def hbar(name: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence]], *, unit: str, x_title: str) -> dict:
    """Horizontal stacked bars, first label on top."""
    ys = [label(v) for v in labels][::-1]
    data = [bar_trace(kind, ys, list(values)[::-1], unit, orientation="h") for kind, values in series]
    height = max(220, 30 * len(labels) + 110)
    return figure(name, data, layout(barmode="stack", height=height, yaxis=_x_axis("category"),
                                     xaxis=_axis_title(unit, x_title), margin={"l": 180, "r": 16, "t": 64, "b": 48}))


def funnel(name: str, stages: Sequence[tuple[str, float, str]]) -> dict:
    """Capacity -> allocated -> working: GPU-hours per stage, its share of the first and the money beside it."""
    data = [{"type": "funnel", "y": [label(s[0]) for s in stages], "x": [_num(s[1]) for s in stages],
             "text": [s[2] for s in stages], "textposition": "inside", "textinfo": "value+percent initial+text",
             "texttemplate": "%{value:,.1f} GPU-h · %{percentInitial:.1%} · %{text}",
             "marker": {"color": ["#CFCFCF", "#56B4E9", "#0072B2"][: len(stages)],
                        "line": {"color": "#4d4d4d", "width": 0.5}},
             "connector": {"line": {"color": "#bdbdbd"}},
             "hovertemplate": "%{y}: %{x:,.1f} GPU-hours (%{percentInitial:.1%} of capacity), %{text}<extra></extra>"}]
    return figure(name, data, layout(height=240, margin={"l": 190, "r": 16, "t": 16, "b": 24}, showlegend=False,
                                     yaxis={"automargin": True}))


def grouped_bars(name: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence]], *, unit: str,
                 y_title: str) -> dict:
    data = [bar_trace(kind, [label(v) for v in labels], values, unit) for kind, values in series]
    return figure(name, data, layout(barmode="group", bargap=0.45, bargroupgap=0.08, height=280,
                                     xaxis=_x_axis("category"), yaxis=_axis_title(unit, y_title)))


def quota_lines(name: str, rows: Iterable[Mapping[str, Any]]) -> dict:
    """Per ClusterQueue and hour: nominal quota (dashed), reserved and borrowed GPUs (steps)."""
    series: dict[str, dict[str, list]] = {}
    for r in rows:
        s = series.setdefault(label(f"{r['cluster']}/{r['cluster_queue']}"), {"t": [], "n": [], "r": [], "b": []})
        s["t"].append(r["t"])
        s["n"].append(r["nominal_gpus"])
        s["r"].append(r["reserved_gpus"])
        s["b"].append(r["borrowed_gpus"])
    data = []
    for i, (queue, s) in enumerate(sorted(series.items())):
        color = OKABE_ITO[i % len(OKABE_ITO)]
        for key, what, dash in (("r", "reserved", "solid"), ("n", "nominal", "dash"), ("b", "borrowed", "dot")):
            data.append({"type": "scatter", "mode": "lines", "name": f"{queue} {what}", "x": s["t"], "y": s[key],
                         "line": {"shape": "hv", "color": color, "dash": dash, "width": 2},
                         "hovertemplate": _hover("gpus")})
    return figure(name, data, layout(xaxis=_x_axis("date"), yaxis=_axis_title("gpus", "GPUs"), height=320))


def free_over_time(rows: Iterable[Any], name: str = "free-gpus") -> dict:
    """Per node group: free GPUs and the largest free block over time (the gap is fragmentation)."""
    series: dict[str, dict[str, list]] = {}
    for r in rows:
        s = series.setdefault(label(f"{r.cluster.name}/{r.node_group}"), {"t": [], "free": [], "block": []})
        s["t"].append(r.taken_at.strftime("%Y-%m-%d %H:%M"))
        s["free"].append(r.free_gpus)
        s["block"].append(r.largest_free_block)
    data = []
    for i, (group, s) in enumerate(sorted(series.items())):
        color = OKABE_ITO[i % len(OKABE_ITO)]
        mode = "lines" if len(s["t"]) > 2 else "lines+markers"  # a lone snapshot would be invisible as a line
        data.append({"type": "scatter", "mode": mode, "name": f"{group} free", "x": s["t"], "y": s["free"],
                     "line": {"shape": "hv", "color": color}, "hovertemplate": _hover("gpus")})
        data.append({"type": "scatter", "mode": mode, "name": f"{group} largest block", "x": s["t"], "y": s["block"],
                     "line": {"shape": "hv", "dash": "dot", "color": color}, "hovertemplate": _hover("gpus")})
    return figure(name, data, layout(xaxis=_x_axis("date"), yaxis=_axis_title("gpus", "GPUs"), height=360))


def as_script_data(figures: Mapping[str, dict | str]) -> dict[str, Any]:
    """{element id: figure} for the template's `json_script` (which escapes it for the page)."""
    return {k: json.loads(v) if isinstance(v, str) else v for k, v in figures.items()}
