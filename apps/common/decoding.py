"""JSON answers of the collectors' sources decoded fast: orjson, with the garbage collector paused.

Prometheus answers (a 10,000-GPU bucket reads ~73,000 series) and Kubernetes LIST pages (4,000 pods in pages of 500)
are the bulk of what a collection decodes; both decode in threads side by side (the Prometheus round runs while the
Kubernetes API is read), so the pause is one count for the process."""

from __future__ import annotations

import gc
import threading
from typing import Any

import orjson


class GcPaused:
    """The garbage collector off while at least one thread decodes an answer or turns one into observations
    (`with GC_PAUSED:`), back on (if it was on) when the last one is done. Decoding allocates a few objects per label
    and no cycle, yet the allocations trigger collections that walk the whole heap: about half of the CPU time of
    decoding a 41,055-series answer (0.074-0.103 s with it on, 0.040 s off: bench/README.md, 2026-12-02 later). A
    count, not gc.disable/enable per thread, because the round's threads decode side by side and the switch is the
    process's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._was_on = False

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                self._was_on = gc.isenabled()
                gc.disable()
            self._inside += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0 and self._was_on:
                gc.enable()


GC_PAUSED = GcPaused()


def loads(data: bytes | str) -> Any:
    """`json.loads` of a source's answer, by orjson with the garbage collector paused (raises `ValueError` on bad
    JSON, as json.loads does: orjson.JSONDecodeError is one)."""
    with GC_PAUSED:
        return orjson.loads(data)
