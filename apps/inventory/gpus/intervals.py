"""Time within a bucket, cut wherever who holds what changes.

A shared ResourceClaim (dra.py) and an oversubscribed HAMi GPU (hami.py) are both split per stretch of time
in which the same holders hold: k consumers at once each get share/k; tenants whose shares add past 1 are
scaled together. This is the one sweep both stand on, so neither bills a GPU twice nor past its capacity.

An interval is `[start, end)` in seconds from any origin the caller picks (the bucket's start, say); the
window is the bucket. Pure arithmetic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

Interval = tuple[float, float]
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Piece(Generic[K]):
    """A stretch of the window in which the same keys hold."""

    start: float
    end: float
    active: frozenset[K]

    @property
    def seconds(self) -> float:
        return self.end - self.start


def clip(interval: Interval, window: Interval) -> Interval | None:
    """The part of `interval` inside `window`, None when they do not overlap."""
    start, end = max(interval[0], window[0]), min(interval[1], window[1])
    return (start, end) if end > start else None


def pieces(held: Mapping[K, Iterable[Interval]], window: Interval) -> list[Piece[K]]:
    """`window` cut at every start and end of `held` that falls inside it, in order. The pieces tile the
    window exactly (stretches where nobody holds are pieces with no active key), so sums over them never
    count a second twice."""
    deltas: dict[float, dict[K, int]] = defaultdict(lambda: defaultdict(int))
    for key, intervals in held.items():
        for interval in intervals:
            part = clip(interval, window)
            if part is not None:
                deltas[part[0]][key] += 1
                deltas[part[1]][key] -= 1
    cuts = sorted({window[0], window[1], *deltas})
    depth: dict[K, int] = defaultdict(int)
    out: list[Piece[K]] = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        for key, delta in deltas.get(start, {}).items():
            depth[key] += delta
        out.append(Piece(start, end, frozenset(k for k, n in depth.items() if n > 0)))
    return out


def covered(intervals: Iterable[Interval], piece: Piece[K]) -> float:
    """Seconds of `piece` inside the union of `intervals`."""
    inside = sorted(part for part in (clip(i, (piece.start, piece.end)) for i in intervals) if part is not None)
    total, reach = 0.0, piece.start
    for start, end in inside:
        start = max(start, reach)
        if end > start:
            total += end - start
            reach = end
    return total
