from __future__ import annotations

from datetime import UTC, datetime

import pytest

from devtools.simulator.scenarios import build_scenario

END = datetime(2026, 11, 30, tzinfo=UTC)


@pytest.fixture(scope="session")
def demo():
    return build_scenario("demo", seed=0, end=END)


@pytest.fixture(scope="session")
def served(demo):
    from devtools.simulator.k8s_api import start_server

    srv = start_server(demo)
    yield srv
    srv.stop()
