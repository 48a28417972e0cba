"""The simulator's demo cluster behind its Kubernetes API, at an instant with every capacity and queue case.

Shared by tests/capacity and tests/queues through the `kube_world` fixture in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

END = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
# An instant at which the demo has every case: a fragmentation-pending, a capacity-pending and an
# "other" pod, two quota-pending workloads, a cordoned node and a node without device plugin.
AT = END - timedelta(minutes=30)


@dataclass
class KubeWorld:
    scenario: object
    server: object
    at: datetime

    def api_client(self):  # type: ignore[no-untyped-def]
        """An official-client ApiClient pointed at the simulator (what api_client_for builds from a kubeconfig)."""
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.server.url
        cfg.api_key = {"authorization": "sim-token"}
        cfg.api_key_prefix = {"authorization": "Bearer"}
        return client.ApiClient(configuration=cfg)


def start_kube_world() -> Iterator[KubeWorld]:
    from devtools.simulator.k8s_api import start_server
    from devtools.simulator.scenarios import build_scenario

    scenario = build_scenario("demo", seed=0, end=END, days=2, with_dra=False)  # the pinned cases
    server = start_server(scenario, host="127.0.0.1", port=0)
    server.set_time(AT)
    try:
        yield KubeWorld(scenario, server, AT)
    finally:
        server.stop()


def read_world_snapshot(world: KubeWorld, cluster):  # type: ignore[no-untyped-def]
    """The collector's own read of the simulator (official client over HTTP)."""
    from apps.ingest.collectors.kubernetes import read_snapshot

    return read_snapshot(cluster, api_client=world.api_client())


def record_world(world: KubeWorld, cluster, taken_at: datetime | None = None):  # type: ignore[no-untyped-def]
    """One collection's capacity and queue snapshots of the world, as the collector records them, taken at
    `taken_at` (default: the world's instant)."""
    import dataclasses

    from apps.ingest.services import record_side_snapshots

    snapshot = dataclasses.replace(read_world_snapshot(world, cluster), taken_at=taken_at or world.at)
    record_side_snapshots(cluster, snapshot)
    return snapshot
