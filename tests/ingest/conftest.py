"""A simulated cluster behind the real protocols: the simulator's Kubernetes API over HTTP and a real
Prometheus backfilled from its OpenMetrics export. Shared by the collection tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.inventory.models import Cluster
from tests.harness import cache
from tests.harness.backfill import WINDOW_SECONDS
from tests.harness.prometheus import PrometheusServer, history_blocks, start_prometheus
from tests.harness.services import require_binary
from tests.harness.shared_rows import WORLD_FIXTURES

WINDOW_HOURS = 24
# One end for every world of the session, so worlds built minutes apart describe the same hours.
END = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
STEP_SECONDS = 60
DAYS = 2


@dataclass
class SimWorld:
    scenario: object
    end: datetime
    start: datetime
    prometheus: PrometheusServer
    server: object
    kubeconfig: Path

    @property
    def hours(self) -> list[datetime]:
        """The hours the world's Prometheus holds (and the hour before them): WINDOW_HOURS, or fewer (`_world`)."""
        return [self.start + timedelta(hours=i) for i in range((self.end - self.start) // timedelta(hours=1))]


def _export(scenario_name: str, since: datetime, until: datetime, out: Path, *extra: str) -> None:
    # --end/--days must match build_scenario below: the scenario is generated from them.
    call_command(
        "simulate", "export-openmetrics", "--scenario", scenario_name, "--since", since.isoformat(),
        "--until", until.isoformat(), "--end", until.isoformat(), "--days", str(DAYS),
        "--step", str(STEP_SECONDS), "--out", str(out), *extra,
    )


def _world(tmp: Path, *extra: str, name: str = "demo", hours: int = WINDOW_HOURS) -> Iterator[SimWorld]:
    """The scenario `name` (built over DAYS) whose last `hours` (and the hour before them) are in a real Prometheus."""
    from devtools.simulator.k8s_api import start_server
    from devtools.simulator.scenarios import build_scenario

    require_binary("promtool")
    require_binary("prometheus")
    end = END
    start = end - timedelta(hours=hours)
    # The demo's worlds are its own cases, read once at the end (its DRA claims need reads every 5 minutes:
    # tests/ingest/test_collect_dra.py and tests/findings/test_mixed_findings.py collect `mixed` so).
    plain = {"with_dra": False} if name == "demo" else {}
    scenario = build_scenario(name, seed=0, end=end, days=DAYS, **plain)
    flags = [*extra, *(["--no-with-dra"] if plain else [])]
    # Made once per recipe for the whole run (every module and pytest-xdist worker asking for it shares it). Written
    # one file per promtool block window (`path` a directory): no split pass over the hundreds of MB before promtool
    # (tests/harness/backfill.py).
    blocks = history_blocks(
        [name, (start - timedelta(hours=1)).isoformat(), end.isoformat(), str(DAYS), str(STEP_SECONDS), *flags],
        cache.source_files("devtools/simulator", "devtools/management"),
        lambda path: _export(name, start - timedelta(hours=1), end, path, *flags, "--window-seconds",
                             str(WINDOW_SECONDS)),
    )
    prom = start_prometheus(None, blocks=blocks)
    server = start_server(scenario, host="127.0.0.1", port=0)
    server.set_time(end)
    kubeconfig = tmp / "kubeconfig"
    server.write_kubeconfig(str(kubeconfig))
    try:
        yield SimWorld(scenario, end, start, prom, server, kubeconfig)
    finally:
        server.stop()
        prom.close()


@pytest.fixture(scope="session")
def sim_world(tmp_path_factory, django_db_setup, django_db_blocker) -> Iterator[SimWorld]:
    yield from _world(tmp_path_factory.mktemp("sim"))


# tests/ingest/test_collect_differential.py compares the last 4 hours of the demo in both label variants: the
# exported variant's Prometheus holds those and the hour before them (5 of 25 hours to export and backfill).
EXPORTED_HOURS = 4


@pytest.fixture(scope="session")
def sim_world_exported(tmp_path_factory, django_db_setup, django_db_blocker) -> Iterator[SimWorld]:
    """The same cluster scraped through Prometheus Operator (exported_pod, lowercase hostname): its last
    EXPORTED_HOURS."""
    yield from _world(tmp_path_factory.mktemp("sim-exported"), "--exported-labels", "--hostname-label", "hostname",
                      hours=EXPORTED_HOURS)


@pytest.fixture(scope="session")
def sim_world_recorded(tmp_path_factory, django_db_setup, django_db_blocker) -> Iterator[SimWorld]:
    """The demo whose Prometheus also holds the series of deploy/monitoring/gpufinops-recording.yaml (the export
    writes them as a Prometheus evaluating the rules at every scrape stores them: `--recording-rules`)."""
    yield from _world(tmp_path_factory.mktemp("sim-recorded"), "--recording-rules")


@pytest.fixture(scope="session")
def sim_world_no_node_name(tmp_path_factory, django_db_setup, django_db_blocker) -> Iterator[SimWorld]:
    """The demo whose dcgm-exporters run without NODE_NAME: every series' Hostname is the exporter's pod."""
    yield from _world(tmp_path_factory.mktemp("sim-no-node-name"), name="demo-no-node-name")


def mixed_world(tmp_path_factory, name: str, hours: int | None = None) -> Iterator[SimWorld]:
    """The `mixed` scenario (or a variant: `mixed-v1beta1`, `mixed-noattr`): every way GPUs are handed out. Its tests
    collect the last `hours` (MIXED_HOURS unless given: NOATTR_HOURS), so its Prometheus holds those and the hour
    before them, as the 24-hour worlds hold the hour before their first (the same look-back; 15 of the 25 hours to
    export and backfill)."""
    yield from _world(tmp_path_factory.mktemp(name), name=name, hours=hours or MIXED_HOURS)


def make_cluster(world: SimWorld, name: str = "sim-demo", **kwargs) -> Cluster:  # type: ignore[no-untyped-def]
    return Cluster.objects.create(
        name=name, prometheus_url=world.prometheus.url, kubeconfig_path=str(world.kubeconfig), **kwargs
    )


# The price card the differential tests charge the demo at (findings and savings compare dollars with the oracle).
DEMO_PRICES = {"NVIDIA-H100-80GB-HBM3": Decimal("4.00"), "NVIDIA-A100-SXM4-80GB": Decimal("2.50"),
               "NVIDIA-L4": Decimal("0.80"), "NVIDIA-L40S": Decimal("1.50")}


def collect_priced(world: SimWorld, prices: dict[str, Decimal] = DEMO_PRICES) -> Cluster:
    """Price the world's GPU models from the first of its month, then collect its hours with findings: a cluster
    whose ledger and findings an oracle can check to the cent."""
    from apps.ingest.services import collect_cluster
    from apps.inventory.services import set_price

    for model, price in prices.items():
        set_price(model, price, world.start.date().replace(day=1))
    cluster = make_cluster(world)
    report = collect_cluster(cluster, world.hours, now=world.end)
    assert report.ok and not report.findings_failed, (report.failed, report.findings_failed)
    return cluster


# --- `mixed` and `mixed-noattr` read every 5 minutes, once for the ledger's and the findings' tests -----------------

SNAPSHOT = timedelta(minutes=5)
# The last hours of the window: every DRA and HAMi case of `mixed` happens in them, with the idle claim's whole run and
# most of the oversubscribed GPU's.
MIXED_HOURS = 14
# `mixed-noattr` names the DRA nodes whose exporter attributes nothing: its last 6 hours hold allocations on all three
# (the long runs on dra-h100-0 and dra-mig-0, dra-h100-1's reserved pair released 5 hours before the end and its
# back-to-back runs), and the ends of a failed and two finished jobs; reading 14 hours every 5 minutes cost 8 more
# hours of the suite's most expensive collection (`mixed` itself keeps every case of its 14 hours).
NOATTR_HOURS = 6
# The price card the findings of `mixed` are charged at (from three days before the window's end).
MIXED_PRICES = {"NVIDIA-H100-80GB-HBM3": Decimal("4.00"), "NVIDIA-A100-SXM4-80GB": Decimal("2.50"),
                "NVIDIA-L4": Decimal("0.80")}


@pytest.fixture(scope="session")
def sim_mixed(tmp_path_factory, django_db_setup, django_db_blocker) -> Iterator[SimWorld]:
    yield from mixed_world(tmp_path_factory, "mixed")


@pytest.fixture(scope="session")
def sim_mixed_noattr(tmp_path_factory, django_db_setup, django_db_blocker) -> Iterator[SimWorld]:
    yield from mixed_world(tmp_path_factory, "mixed-noattr", NOATTR_HOURS)


def collect_every_five_minutes(cluster: Cluster, world: SimWorld, hours: list[datetime]) -> list:
    """Snapshots every 5 minutes through each hour, then the hour's bucket and its findings, as beat drives the
    collector. Claims made from templates are deleted with their pods and the API keeps no allocation history, so a
    DRA cluster is read as the collector reads it in production. Returns each bucket's result."""
    import dataclasses

    from apps.ingest.collectors.kubernetes import read_snapshot
    from apps.ingest.collectors.prometheus import PrometheusSource
    from apps.ingest.services import record_findings, record_snapshot
    from apps.usage import services as ledger

    source = PrometheusSource(cluster)
    at = hours[0]
    results = []
    for hour in hours:
        snap = None
        while at <= hour + timedelta(hours=1):
            world.server.set_time(at)
            snap = dataclasses.replace(read_snapshot(cluster), taken_at=at)
            record_snapshot(cluster, snap)
            at += SNAPSHOT
        # The hour's last read (at its end) is the next hour's first: read once, as beat reads every 5 minutes (reading
        # it again recorded the same snapshot twice, 14 of the 182 reads of each collection).
        outcome = ledger.collect_bucket(cluster, hour, now=world.end, source=source,
                                        namespace_labels=snap.namespace_labels, owner="test")
        assert outcome.state == "written", outcome.error
        assert record_findings(cluster, hour, outcome, source) == ""  # findings read DRA and HAMi rows too
        results.append(outcome.result)
    world.server.set_time(world.end)
    return results


@dataclass(frozen=True)
class MixedCollection:
    """One world's cluster collected every 5 minutes over `hours`, and each bucket's result."""

    world: SimWorld
    cluster_pk: int
    hours: list[datetime]
    results: list

    @property
    def cluster(self) -> Cluster:
        return Cluster.objects.get(pk=self.cluster_pk)  # fresh: a test's writes to it are rolled back

    @property
    def window(self) -> tuple[datetime, datetime]:
        return self.hours[0], self.hours[-1] + timedelta(hours=1)


def _collect_mixed(mixed: SimWorld, noattr: SimWorld) -> dict[str, MixedCollection]:
    from apps.inventory.services import set_price

    for model, price in MIXED_PRICES.items():
        set_price(model, price, (mixed.end - timedelta(days=3)).date())
    out = {}
    for key, world, name in (("mixed", mixed, "sim-mixed"), ("noattr", noattr, "sim-mixed-noattr")):
        cluster = make_cluster(world, name=name)
        hours = world.hours  # every hour its Prometheus holds: MIXED_HOURS, NOATTR_HOURS
        out[key] = MixedCollection(world, cluster.pk, hours, collect_every_five_minutes(cluster, world, hours))
    return out


# Reading `mixed` and `mixed-noattr` every 5 minutes is the most expensive collection of the suite: the ledger's
# (tests/ingest/test_collect_dra.py) and the findings' (tests/findings/test_mixed_findings.py) tests read one, built
# once (tests/harness/shared_rows.py) on one pytest-xdist worker (SHARED_WORLD_GROUPS, tests/conftest.py).
WORLD_FIXTURES.add("shared_mixed_collection")


@pytest.fixture
def shared_mixed_collection(shared_rows, sim_mixed, sim_mixed_noattr) -> dict[str, MixedCollection]:
    return shared_rows.world("shared_mixed_collection", lambda: _collect_mixed(sim_mixed, sim_mixed_noattr))


@pytest.fixture
def mixed_collection(shared_mixed_collection, db) -> dict[str, MixedCollection]:
    return shared_mixed_collection


# The demo's day collected with findings at DEMO_PRICES once for the findings' and the savings' oracle tests
# (tests/findings/test_oracle_differential.py, tests/savings/test_oracle_differential.py; one pytest-xdist group,
# SHARED_WORLD_GROUPS in tests/conftest.py). Each test's own writes are rolled back (tests/harness/shared_rows.py).
WORLD_FIXTURES.add("shared_priced_day")


@pytest.fixture
def shared_priced_day(shared_rows, sim_world) -> int:
    return shared_rows.world("shared_priced_day", lambda: collect_priced(sim_world).pk)


@pytest.fixture
def priced_day(shared_priced_day, db) -> Cluster:
    """The priced cluster, read afresh (what a test writes to it is rolled back)."""
    return Cluster.objects.get(pk=shared_priced_day)
