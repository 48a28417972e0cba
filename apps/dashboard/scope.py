"""What a page is about, read from its query string: the period, the filters and the signal (all shareable).

* Period: the one period rule (`apps.common.periods`), as the API and the findings read it: `?period=2026-W48`
  (ISO week), `?period=2026-11` (calendar month), `?days=7` (the last N whole UTC days, today included), or
  `?start=2026-11-20&end=2026-11-27` (custom, half-open, UTC dates or times on the hour). Default: the last 7
  days. Weeks and months are the reports' periods: the same bounds as the e-mail.
* Filters: `cluster`, `team`, `namespace`, `node_group`, `gpu_model` (each repeatable), `signal`.
* Bad input never fails a page: each bad value is dropped with a message saying why, and the page shows the
  rest. Team filters are narrowed to the teams the caller may see (visibility stays server-side).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from urllib.parse import urlencode

from django.conf import settings
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from apps.common.params import parse_text_list
from apps.common.periods import PERIOD_KEYS, Window, page_window, quick_windows
from apps.common.timeutils import to_utc
from apps.usage.activity import SIGNALS, default_signal

FILTERS: tuple[str, ...] = ("cluster", "team", "namespace", "node_group", "gpu_model")
FILTER_LABELS = [("cluster", "Cluster"), ("team", "Team"), ("namespace", "Namespace"), ("node_group", "Node group"),
                 ("gpu_model", "GPU model")]
SIGNAL_NAMES = {
    "sm_active": "SM active (DCGM_FI_PROF_SM_ACTIVE)",
    "gr_engine_active": "GR engine active (DCGM_FI_PROF_GR_ENGINE_ACTIVE)",
    "tensor_active": "Tensor active (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)",
    "gpu_util": "GPU_UTIL (DCGM_FI_DEV_GPU_UTIL, naive)",
}


def _message(exc: ValidationError) -> str:
    detail = exc.detail
    if isinstance(detail, dict):
        return " ".join(str(m) for msgs in detail.values() for m in (msgs if isinstance(msgs, list) else [msgs]))
    return str(detail)


@dataclass(frozen=True)
class Scope:
    """The period, filters and signal of one page view, with the caller's visibility and what was refused."""

    window: Window
    filters: dict[str, tuple[str, ...]]
    signal: str
    visible_teams: set[str] | None
    errors: tuple[str, ...] = ()
    extra: tuple[tuple[str, str], ...] = field(default=())  # page-specific parameters to keep (sort, page)

    @property
    def sees_all(self) -> bool:
        return self.visible_teams is None

    @property
    def usage_filters(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.filters.items() if v}

    @property
    def filtered(self) -> bool:
        return any(self.filters.values())

    def params(self, **overrides: object) -> list[tuple[str, str]]:
        """The query parameters that reproduce this view, with `overrides` (None drops a key)."""
        items: list[tuple[str, str]] = list(self.window.params)
        for key in FILTERS:
            items.extend((key, v) for v in self.filters.get(key, ()))
        if self.signal != default_signal():
            items.append(("signal", self.signal))
        items.extend(self.extra)
        period_keys = set(PERIOD_KEYS)
        if period_keys & set(overrides):
            items = [(k, v) for k, v in items if k not in period_keys]
        out = [(k, v) for k, v in items if k not in overrides]
        for key, value in overrides.items():
            if value is None:
                continue
            if isinstance(value, list | tuple):
                out.extend((key, str(v)) for v in value)
            else:
                out.append((key, str(value)))
        return out

    def query(self, **overrides: object) -> str:
        return urlencode(self.params(**overrides))

    def with_window(self, window: Window) -> Scope:
        return replace(self, window=window)

    def with_filters(self, **filters: tuple[str, ...]) -> Scope:
        return replace(self, filters={**self.filters, **filters})


def parse_window(params: Mapping[str, str], now: datetime | None = None) -> tuple[Window, list[str]]:
    """The period of the query string (the one period rule, `apps.common.periods`), and messages for whatever was
    refused."""
    return page_window(params, to_utc(now or timezone.now()), max_days=settings.GPUFINOPS_API_MAX_RANGE_DAYS,
                       max_hourly_days=settings.GPUFINOPS_API_MAX_HOURLY_DAYS)


def parse_scope(params: Mapping[str, str], visible_teams: set[str] | None, *, now: datetime | None = None,
                keep: tuple[str, ...] = ()) -> Scope:
    """The scope of a page view; `keep` names page-specific parameters that links should carry on."""
    window, errors = parse_window(params, now)
    filters: dict[str, tuple[str, ...]] = {}
    for key in FILTERS:
        try:
            values = parse_text_list(params, key)
        except ValidationError as exc:
            errors.append(f"Filter {key}: {_message(exc)} The filter was left out.")
            continue
        if key == "team" and visible_teams is not None:
            hidden = [v for v in values if v not in visible_teams]
            if hidden:
                mine = ", ".join(sorted(visible_teams)) or "none yet"
                errors.append(f"Team {', '.join(hidden)} is not visible to you (you can see: {mine}); ask an "
                              "administrator to add you to a team (manage.py add_team_member TEAM USER).")
                values = [v for v in values if v in visible_teams]
        if values:
            filters[key] = tuple(values)
    signal = (params.get("signal") or "").strip() or default_signal()
    if signal not in SIGNALS:
        errors.append(f"Unknown signal {signal[:40]!r}; expected one of {', '.join(SIGNALS)}. "
                      f"Showing {default_signal()}.")
        signal = default_signal()
    extra = tuple((k, value) for k in keep if (value := params.get(k)))
    return Scope(window, filters, signal, visible_teams, tuple(errors), extra)


def period_choices(scope: Scope, now: datetime | None = None) -> list[tuple[str, str, bool]]:
    """(label, query string, current?) of the quick period links: this/last week and month, last 7/30 days."""
    out = []
    for label, w in quick_windows(to_utc(now or timezone.now())):
        out.append((label, scope.query(**dict(w.params)), w.params == scope.window.params))
    return out
