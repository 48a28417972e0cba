"""The order pytest-xdist hands test groups out in (tests/conftest.py, tests/harness/group_seconds.py): the longest
last time first, so the workers finish together; a group without a figure placed by the long-fixture rule."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.conftest import _longest_groups_first
from tests.harness.group_seconds import group_of


class Item:
    """What the ordering reads of a collected test: its module, fixtures, markers."""

    def __init__(self, name: str, group: str, *, fixtures: tuple[str, ...] = (), slow: bool = False) -> None:
        self.name, self.path, self.fixturenames = name, Path(f"/repo/{group}.py"), fixtures
        self.markers = {"xdist_group": SimpleNamespace(args=(group,))}
        if slow:
            self.markers["slow"] = SimpleNamespace(args=())

    def get_closest_marker(self, name: str) -> SimpleNamespace | None:
        return self.markers.get(name)


def names(items) -> list[str]:
    return [item.name for item in items]


def test_groups_go_longest_first_each_keeping_its_order():
    items = [Item("a1", "a"), Item("b1", "b"), Item("a2", "a"), Item("c1", "c")]
    ordered = _longest_groups_first(items, {"a": 1.0, "b": 9.0, "c": 4.0})
    assert names(ordered) == ["b1", "c1", "a1", "a2"]


def test_a_group_without_a_figure_goes_first_when_long_and_last_otherwise():
    items = [Item("new", "new"), Item("known", "known"), Item("new-slow", "new-slow", slow=True),
             Item("new-demo", "new-demo", fixtures=("demo_site",))]
    ordered = _longest_groups_first(items, {"known": 3.0})
    assert names(ordered) == ["new-slow", "new-demo", "known", "new"]


def test_without_figures_the_order_is_kept():
    items = [Item("z", "z"), Item("a", "a", slow=True)]
    assert names(_longest_groups_first(items, {})) == ["z", "a"]


def test_the_group_is_read_from_the_node_id_pytest_xdist_wrote():
    assert group_of("tests/api/test_usage.py::test_x[a@b]@world-shared_ledger") == "world-shared_ledger"
    assert group_of("tests/api/test_usage.py::test_x") == "tests/api/test_usage.py"
