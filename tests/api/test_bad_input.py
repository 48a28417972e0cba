"""Bad input on every parameter is a 400 naming the parameter, never a 500 or a silent default."""

from __future__ import annotations

import pytest

from apps.common.params import parse_datetime_value

USAGE = "/api/v1/usage/"
CASES = [
    (USAGE, "start=yesterday", "start"),
    (USAGE, "start=2026-13-01", "start"),
    (USAGE, "start=2026-02-30", "start"),
    (USAGE, "start=20261123", "start"),
    (USAGE, "start=0001-01-01", "start"),
    (USAGE, "start=2026-11-23T00:30:00Z", "start"),
    (USAGE, "end=not-a-date", "end"),
    (USAGE, "end=9999-12-31T23:00:00Z", "end"),
    (USAGE, "end=2026-11-23T00:00:01Z", "end"),
    (USAGE, "start=2026-11-24&end=2026-11-23", "end"),
    (USAGE, "start=2026-11-23&end=2026-11-23", "end"),
    (USAGE, "start=2020-01-01&end=2026-01-01", "end"),
    (USAGE, "group_by=project", "group_by"),
    (USAGE, "group_by=team,,day", "group_by"),
    (USAGE, "group_by=TEAM", "group_by"),
    (USAGE, "signal=dram_active", "signal"),
    (USAGE, "format=xml", "format"),
    (USAGE, "cluster=%00", "cluster"),
    (USAGE, "team=" + "x" * 300, "team"),
    ("/api/v1/idle-allocations/", "signal=nope", "signal"),
    ("/api/v1/idle-allocations/", "cluster=a%0Ab", "cluster"),
    ("/api/v1/idle-allocations/", "team=%7F", "team"),
    ("/api/v1/idle-allocations/", "page=0", "page"),
    ("/api/v1/idle-allocations/", "page=99", "page"),
    ("/api/v1/idle-allocations/", "page_size=100000", "page_size"),
    ("/api/v1/teams/", "page=abc", "page"),
    ("/api/v1/teams/", "page_size=0", "page_size"),
    ("/api/v1/teams/", "format=xml", "format"),
    ("/api/v1/clusters/", "page=-1", "page"),
    ("/api/v1/clusters/", "page_size=1.5", "page_size"),
]


@pytest.mark.parametrize(("url", "query", "param"), CASES)
def test_it_answers_400_naming_the_bad_parameter(clients, url, query, param):
    response = clients["root"].get(f"{url}?{query}")
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body["errors"]) == [param]
    assert body["errors"][param] and all(isinstance(m, str) for m in body["errors"][param])


def test_it_bounds_the_range_by_the_configured_maximum(clients, settings):
    settings.GPUFINOPS_API_MAX_RANGE_DAYS = 31
    assert clients["root"].get(f"{USAGE}?start=2026-01-01&end=2026-02-01").status_code == 200
    response = clients["root"].get(f"{USAGE}?start=2026-01-01&end=2026-02-01T01:00:00Z")
    assert response.status_code == 400 and "31 days" in response.json()["errors"]["end"][0]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-11-23", "2026-11-23T00:00:00+00:00"),
        ("2026-11-23T00:00:00Z", "2026-11-23T00:00:00+00:00"),
        ("2026-11-23T01:00:00+01:00", "2026-11-23T00:00:00+00:00"),
        ("2026-11-23T01:00:00 01:00", "2026-11-23T00:00:00+00:00"),  # '+' sent unencoded
        ("2026-11-23T05:00:00", "2026-11-23T05:00:00+00:00"),  # no offset: UTC
    ],
)
def test_it_reads_iso_dates_and_times_as_utc(raw, expected):
    assert parse_datetime_value("start", raw).isoformat() == expected


def test_it_accepts_offsets_and_dates_in_the_usage_range(clients):
    body = clients["root"].get(f"{USAGE}?start=2026-11-23T01:00:00%2B01:00&end=2026-11-24").json()
    assert body["start"] == "2026-11-23T00:00:00Z"
    assert body["totals"]["allocated_gpu_hours"] == 42
