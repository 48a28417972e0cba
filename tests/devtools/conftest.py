from __future__ import annotations

from datetime import UTC, datetime

import pytest

from devtools.simulator.scenarios import build_scenario

END = datetime(2026, 11, 30, tzinfo=UTC)


@pytest.fixture(scope="session")
def demo():
    return build_scenario("demo", seed=0, end=END, with_dra=False)  # the demo's own cases, as pinned


@pytest.fixture(scope="session")
def served(demo):
    from devtools.simulator.k8s_api import start_server

    srv = start_server(demo)
    yield srv
    srv.stop()


MIXED_DAYS = 3


@pytest.fixture(scope="session")
def mixed():
    return build_scenario("mixed", seed=0, end=END, days=MIXED_DAYS)


@pytest.fixture(scope="session")
def mixed_served(mixed):
    from devtools.simulator.k8s_api import start_server

    srv = start_server(mixed)
    yield srv
    srv.stop()
