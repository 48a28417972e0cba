"""Pure functions: selector rows in, Plotly figure JSON out (rendered by static/js/plotly.min.js).

Kept free of Django and queries so each chart can be tested with plain lists.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

import plotly.graph_objects as go

COLORS = {"working": "#2e7d32", "idle": "#ef6c00", "unmeasured": "#9e9e9e", "unallocated": "#90caf9"}
LAYOUT = {
    "barmode": "stack",
    "margin": {"l": 50, "r": 10, "t": 30, "b": 40},
    "legend": {"orientation": "h", "y": -0.2},
    "height": 320,
    "template": "plotly_white",
}


def _json(fig: go.Figure) -> str:
    return fig.to_json()


def label(text: object) -> str:
    """A tenant-written name as chart text. Plotly renders a subset of HTML in labels, legends and hover text
    (`<a href>` becomes a link): entities keep `<`, `>` and `&` plain text, shown as written, never markup."""
    return html.escape(str(text), quote=False)


def daily_activity(rows: Iterable[Mapping[str, Any]]) -> str:
    """Stacked bars per day: working, idle and unmeasured GPU-hours (they add up to allocated)."""
    rows = list(rows)
    days = [r["day"] for r in rows]
    fig = go.Figure(layout={**LAYOUT, "yaxis": {"title": "GPU-hours"}})
    for kind in ("working", "idle", "unmeasured"):
        fig.add_bar(name=kind, x=days, y=[r[f"{kind}_gpu_hours"] for r in rows], marker_color=COLORS[kind])
    return _json(fig)


def team_split(rows: Iterable[Mapping[str, Any]]) -> str:
    """Horizontal stacked bars per team, largest allocation on top."""
    rows = sorted(rows, key=lambda r: r["allocated_gpu_hours"])
    teams = [label(r["team"]) for r in rows]
    fig = go.Figure(layout={**LAYOUT, "height": max(240, 28 * len(rows) + 90), "xaxis": {"title": "GPU-hours"}})
    for kind in ("working", "idle", "unmeasured"):
        fig.add_bar(name=kind, y=teams, x=[r[f"{kind}_gpu_hours"] for r in rows], orientation="h",
                    marker_color=COLORS[kind])
    return _json(fig)


def free_over_time(rows: Iterable[Any]) -> str:
    """Per node group: free GPUs and the largest free block over time (the gap is fragmentation)."""
    series: dict[str, dict[str, list]] = {}
    for r in rows:
        s = series.setdefault(label(f"{r.cluster.name}/{r.node_group}"), {"t": [], "free": [], "block": []})
        s["t"].append(r.taken_at.isoformat())
        s["free"].append(r.free_gpus)
        s["block"].append(r.largest_free_block)
    fig = go.Figure(layout={**LAYOUT, "barmode": None, "yaxis": {"title": "GPUs"}, "height": 360})
    for name, s in sorted(series.items()):
        mode = "lines" if len(s["t"]) > 2 else "lines+markers"  # a lone snapshot would be invisible as a line
        fig.add_scatter(name=f"{name} free", x=s["t"], y=s["free"], mode=mode, line={"shape": "hv"})
        fig.add_scatter(name=f"{name} largest block", x=s["t"], y=s["block"], mode=mode,
                        line={"shape": "hv", "dash": "dot"})
    return _json(fig)


def as_script_data(figures: Mapping[str, str]) -> dict[str, Any]:
    """{element id: figure} for the template's `json_script` (which escapes it for the page)."""
    return {k: json.loads(v) for k, v in figures.items()}
