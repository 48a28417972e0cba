"""`promtool tsdb create-blocks-from openmetrics`, a third of the CPU: one call per two-hour window.

Why: promtool (2.42, Debian's) makes one block per two-hour window and, for each window, parses the whole input
again, keeping only that window's samples; a simulated day of `demo` (895 MB, 13 windows) cost 46 CPU-s, paid by
every simulated world of a cold test run (each CI run starts cold). Written out one file per window first (a
streaming pass in Python, ~4 CPU-s), the same 13 blocks cost 15 CPU-s: the same time ranges, samples, series and
chunks (`promtool tsdb list`, compared when this was written). Newer promtools have `--max-block-duration`, which
the Debian one lacks. The simulator's histories skip the split: `simulate export-openmetrics --window-seconds
WINDOW_SECONDS` writes one file per window itself (a directory, which `backfill` takes as it is).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import BinaryIO

# promtool's block length (tsdb.DefaultBlockDuration): windows aligned to multiples of it since the epoch.
WINDOW_SECONDS = 7200


def go_env() -> dict[str, str]:
    """The environment of the Go programs the tests run (promtool, Prometheus): Go collects garbage each time the
    heap doubles (GOGC=100); these are small (a few hundred MB at most) and short-lived, and letting the heap grow
    five-fold first cuts a 24-hour world's promtool CPU by ~15 % (GC 0.27 -> 0.10 CPU-s a window, gctrace) and the
    test Prometheus' query answering by ~25 %. A GOGC set by whoever runs the tests wins."""
    return {"GOGC": "400", **os.environ}


class BackfillError(RuntimeError):
    """promtool refused a file."""


def backfill(promtool: str, openmetrics: Path, target: Path, *, timeout: float) -> None:
    """TSDB blocks of `openmetrics` (ending with `# EOF`, every sample timestamped) in `target`; or of each file of
    the directory `openmetrics`, files already one per window (`simulate export-openmetrics --window-seconds
    WINDOW_SECONDS`: no split pass)."""
    if openmetrics.is_dir():
        for chunk in sorted(openmetrics.iterdir()):
            _create_blocks(promtool, chunk, target, timeout=timeout)
        return
    workdir = Path(tempfile.mkdtemp(prefix="gpufinops-backfill-", dir=target.parent))
    try:
        try:
            chunks = split_by_window(openmetrics, workdir)
        except ValueError:  # a line this split does not understand: promtool reads the file whole
            chunks = [openmetrics]
        for chunk in chunks:
            _create_blocks(promtool, chunk, target, timeout=timeout)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _create_blocks(promtool: str, openmetrics: Path, target: Path, *, timeout: float) -> None:
    result = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(openmetrics),
                             str(target)], capture_output=True, text=True, timeout=timeout, env=go_env())
    if result.returncode != 0:
        raise BackfillError(f"promtool backfill failed ({result.returncode}): {result.stderr or result.stdout}")


def split_by_window(openmetrics: Path, into: Path) -> list[Path]:
    """One OpenMetrics file per two-hour window of sample timestamps, each with every metadata line met before its
    samples (families stay whole and in order) and its own `# EOF`. ValueError on a sample without a timestamp."""
    files: dict[int, BinaryIO] = {}
    meta: list[bytes] = []
    try:
        with openmetrics.open("rb") as source:
            for line in source:
                if line.startswith(b"#"):
                    if line.startswith(b"# EOF"):
                        continue
                    meta.append(line)
                    for out in files.values():
                        out.write(line)
                    continue
                if not line.strip():
                    continue
                window = int(float(line.rsplit(b" ", 2)[-1]) // WINDOW_SECONDS) if line.count(b" ") >= 2 else None
                if window is None:
                    raise ValueError(f"a sample without a timestamp: {line[:200]!r}")
                out = files.get(window)
                if out is None:
                    out = files[window] = (into / f"window-{window}.om").open("wb")
                    out.writelines(meta)
                out.write(line)
    finally:
        for out in files.values():
            out.write(b"# EOF\n")
            out.close()
    return [into / f"window-{w}.om" for w in sorted(files)]


def block_listing(promtool: str, blocks: Path) -> list[tuple[str, ...]]:
    """`promtool tsdb list` of a data directory without the block ids and durations: each block's (min time, max
    time, samples, chunks, series), sorted; equal listings are blocks of the same samples."""
    out = subprocess.run([promtool, "tsdb", "list", str(blocks)], capture_output=True, text=True, check=True)
    return sorted(tuple(line.split()[1:3] + line.split()[4:7]) for line in out.stdout.splitlines()[1:])
