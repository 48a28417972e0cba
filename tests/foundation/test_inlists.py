"""`in_batches`: the one home for IN-list sizes (SQLite's 999-parameter bound), and a lookup past that bound."""

import pytest

from apps.common.inlists import IN_LIST_SIZE, in_batches


@pytest.mark.parametrize(("n", "size", "lengths"), [
    (0, 3, []),
    (1, 3, [1]),
    (3, 3, [3]),
    (7, 3, [3, 3, 1]),
    (1001, IN_LIST_SIZE, [500, 500, 1]),
])
def test_batches_cover_every_item_once_in_order(n, size, lengths):
    items = list(range(n))
    batches = list(in_batches(items, size))
    assert [len(b) for b in batches] == lengths
    assert [x for b in batches for x in b] == items


def test_a_batch_stays_under_sqlites_parameter_bound_with_room_for_the_filters_own():
    assert IN_LIST_SIZE + 20 < 999


def test_a_size_below_one_is_refused():
    with pytest.raises(ValueError, match="positive"):
        list(in_batches([1, 2], 0))


@pytest.mark.django_db
def test_a_lookup_by_more_keys_than_one_batch_asks_one_statement_per_batch(django_assert_num_queries):
    """Through a product selector: 1,200 pod names of one cluster and hour are asked in 3 statements of <= 500."""
    from datetime import UTC, datetime

    from apps.usage.selectors.workloads import pod_workloads

    hour = datetime(2026, 11, 2, 5, tzinfo=UTC)
    pods = [("none", hour, "ns", f"pod-{i}") for i in range(1200)]
    with django_assert_num_queries(3):
        assert pod_workloads(pods) == {}
