"""Shared worlds of rows (tests/harness/shared_rows.py): built once for the tests that run one after another with
them, each test's writes rolled back, invisible to a test that does not ask for them."""

from __future__ import annotations

import pytest

from apps.inventory.models import Team
from tests.harness.shared_rows import WORLD_FIXTURES

# In file order: a test without the world runs between two with it (which tests/conftest.py would otherwise group).
pytestmark = pytest.mark.keep_order
WORLD_FIXTURES.add("two_teams_world")


def build_two_teams() -> list[str]:
    return [Team.objects.create(name=name).name for name in ("alpha", "beta")]


@pytest.fixture
def two_teams_world(shared_rows) -> list[str]:
    return shared_rows.world("two_teams_world", build_two_teams)


@pytest.fixture
def two_teams(two_teams_world, db) -> list[str]:
    return two_teams_world


def team_names() -> list[str]:
    return sorted(Team.objects.values_list("name", flat=True))


def test_a_test_sees_the_world_and_may_change_it(two_teams):
    assert team_names() == ["alpha", "beta"] == two_teams
    Team.objects.filter(name="alpha").delete()
    Team.objects.create(name="gamma")
    assert team_names() == ["beta", "gamma"]


def test_the_next_test_sees_the_world_as_built(two_teams):
    assert team_names() == ["alpha", "beta"]


def test_a_test_without_the_world_never_sees_its_rows(db):
    assert team_names() == []


def test_the_world_is_there_again_after_a_test_without_it(two_teams):
    assert team_names() == ["alpha", "beta"]


def test_a_world_asked_for_inside_a_tests_transaction_is_refused(db, request):
    with pytest.raises(pytest.UsageError, match="before the test's transaction"):
        request.getfixturevalue("two_teams_world")
