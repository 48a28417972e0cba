"""Bad DCGM data in a real Prometheus is logged in the bucket's warnings and never counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.ingest.collectors.prometheus import PrometheusSource
from apps.inventory.models import Cluster

HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
SERIES = {
    'UUID="GPU-1",namespace="ns",pod="good"': "0.5",
    'UUID="GPU-2",namespace="ns",pod="nan"': "NaN",
    'UUID="GPU-3",namespace="ns",pod="huge"': "7.5",
    'UUID="GPU-4",namespace="ns",pod="negative"': "-0.3",
    'UUID="GPU-5",namespace="ns"': "0.9",  # lost its pod labels
    'namespace="ns",pod="no-uuid"': "0.9",
}


def openmetrics() -> str:
    lines = ["# TYPE DCGM_FI_PROF_SM_ACTIVE gauge"]
    for labels, value in SERIES.items():
        for step in range(61):
            t = HOUR.timestamp() + step * 60
            lines.append(f"DCGM_FI_PROF_SM_ACTIVE{{{labels}}} {value} {t:.0f}")
    return "\n".join([*lines, "# EOF", ""])


@pytest.mark.django_db
def test_it_counts_only_sane_series_and_reports_the_rest(prometheus_factory, tmp_path):
    path = tmp_path / "bad.om"
    path.write_text(openmetrics())
    prom = prometheus_factory(path)
    cluster = Cluster.objects.create(name="bad-data", prometheus_url=prom.url)
    source = PrometheusSource(cluster)
    facts = source.activity(HOUR, HOUR + timedelta(hours=1))
    assert [(f.pod, f.uuid) for f in facts] == [("good", "GPU-1")]
    assert facts[0].values["sm_active"] == pytest.approx(0.5)
    warnings = " | ".join(source.warnings)
    assert "ns/nan" in warnings and "non-numeric" in warnings
    assert "ns/huge" in warnings and "out of range" in warnings
    assert "ns/negative" in warnings
