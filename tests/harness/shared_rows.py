"""Rows built once and shared by consecutive tests, rolled back afterwards: what `setUpTestData` is to a Django
`TestCase`, for pytest fixtures.

A world (`SharedRows.world(name, build)`) is built inside an outer transaction the first time a test asks for it.
The tests that use it run as usual with pytest-django's `db`: each in a savepoint inside that transaction, so
what a test writes is rolled back after it and the next test sees the world exactly as built. The outer
transaction is rolled back, and the world forgotten, as soon as a test that does not use it comes (`release_for`,
called by `pytest_runtest_setup` in tests/conftest.py), before another world is built, and at the end of the
session: a test that does not ask for a world never sees its rows, and transactional tests (which pytest-django
runs after all the others) never run inside the outer transaction.

A world is two function-scoped fixtures: one registered in `WORLD_FIXTURES` that calls `world`, and the one
tests ask for, which adds `db` (pytest-django creates the test database for tests with `db` in their closure).
The hook knows which tests use a world by the registered name (directly or through other fixtures), and the
autouse `_shared_world_first` (tests/conftest.py) opens it before any other fixture of the test writes a row:

    WORLD_FIXTURES.add("shared_ledger")

    @pytest.fixture
    def shared_ledger(shared_rows):
        return shared_rows.world("shared_ledger", build_ledger)

    @pytest.fixture
    def ledger(shared_ledger, db):
        return shared_ledger

tests/conftest.py puts every test of a world, whatever its module, in one pytest-xdist group (`--dist loadgroup`:
one worker runs them one after another), and within a module runs the tests of one world side by side (a module
marked `keep_order` stays in file order), so a world is built once per run, not once per module that asks for it.

Tests must not change the built Python objects (the rows they stand for are rolled back, the objects are not).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

# Fixture names that hold a shared world (tests/<area>/conftest.py register theirs here at import).
WORLD_FIXTURES: set[str] = set()


class SharedRows:
    """At most one world open at a time, on the default database."""

    def __init__(self, blocker) -> None:
        self.blocker = blocker  # pytest-django's django_db_blocker
        self.name = ""
        self.value: Any = None
        self._atomic: Any = None

    def world(self, name: str, build: Callable[[], Any]) -> Any:
        """The world `name`, built by `build()` (outside any test's transaction) unless it is the open one."""
        if name not in WORLD_FIXTURES:
            raise pytest.UsageError(f"shared world {name!r} is not registered in WORLD_FIXTURES")
        if self.name == name:
            return self.value
        self.release()
        from django.db import connection, transaction

        if connection.in_atomic_block:
            raise pytest.UsageError(f"the shared world {name!r} must be built before the test's transaction: ask for "
                                    "its fixture before `db` (or any fixture that writes rows)")
        with self.blocker.unblock():
            self._atomic = transaction.atomic()
            self._atomic.__enter__()
            try:
                self.value = build()
            except BaseException:
                self.release()
                raise
        self.name = name
        return self.value

    def release(self) -> None:
        """Roll the open world back (nothing to do when none is open)."""
        if self._atomic is None:
            return
        from django.db import transaction

        with self.blocker.unblock():
            transaction.set_rollback(True)
            self._atomic.__exit__(None, None, None)
        self._atomic, self.name, self.value = None, "", None

    def release_for(self, item: pytest.Item) -> None:
        """Before `item` runs: roll the open world back unless the item uses it."""
        if self.name and self.name not in getattr(item, "fixturenames", ()):
            self.release()
        elif self.name and _transactional(item):
            raise pytest.UsageError(f"{item.nodeid}: a transactional test cannot use the shared world {self.name!r}")


def _transactional(item: pytest.Item) -> bool:
    fixtures = getattr(item, "fixturenames", ())
    marker = item.get_closest_marker("django_db")
    return "transactional_db" in fixtures or "live_server" in fixtures or bool(
        marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")))
