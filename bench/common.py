"""Helpers shared by the benchmark scripts (run as `python bench/<name>.py`, so this is importable as `common`)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def ensure_db(url: str) -> None:
    """Create the PostgreSQL database named in `url` if it does not exist yet."""
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


# ---- /proc readings (no psutil on the machine) ----

def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far; 0 when it is gone."""
    try:
        # Fields after the parenthesised command: utime and stime are the 12th and 13th.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def children(pid: int) -> list[int]:
    """The direct children of a process."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return out


def machine_cpu() -> tuple[float, float]:
    """The machine's busy and steal CPU seconds so far, over every core (/proc/stat's first line): busy is every
    state but idle and iowait, steal included (time the hypervisor gave another guest while this one wanted it)."""
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    ticks = dict(zip(names, (int(v) for v in first[1:9]), strict=True))
    busy = sum(v for k, v in ticks.items() if k not in ("idle", "iowait"))
    return busy / CLOCK_TICKS, ticks["steal"] / CLOCK_TICKS
