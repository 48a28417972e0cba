"""IN-list batching: one home for how many values a `field__in=` filter over an unbounded list carries per statement.

SQLite binds at most 999 parameters per statement (the limit Django assumes for it) and a filter may add a few of
its own beside the list, so every lookup or delete by a list of keys goes through `in_batches` with `IN_LIST_SIZE`.
PostgreSQL has no such bound, but one size keeps both engines on the same statements and the tests meaningful."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

IN_LIST_SIZE = 500


def in_batches(items: Sequence[T], size: int = IN_LIST_SIZE) -> Iterator[Sequence[T]]:
    """`items` in consecutive slices of at most `size` (none for an empty sequence), in order."""
    if size < 1:
        raise ValueError(f"batch size must be positive, not {size}")
    for i in range(0, len(items), size):
        yield items[i:i + size]
