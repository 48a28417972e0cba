"""bench/api.py's load from wrk, and `--compare-trivial`: the trivial endpoint against the usage mix on one gunicorn,
round by round, with what each round ran against (bench/README.md "Why the ratio swung").

Every round records, besides wrk's requests/s and latency: the CPU the gunicorn workers and their PostgreSQL backends
spent per request (the cost of an answer, which other load on the machine moves much less than the throughput),
wrk's own CPU, the CPU every other process on the machine spent in the same seconds, the hypervisor's steal, and how
wrk's connections were split between the gunicorn workers (a worker is one process: its threads share one GIL, so
a worker holding most of the connections caps the round at about one core).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from common import children, cpu_seconds, machine_cpu  # bench/common.py (the script's folder is on sys.path)

WRK_SCRIPT = """
local reqs = {%s}
local i = 0
request = function()
  i = i %% #reqs + 1
  return wrk.format("GET", reqs[i][1], {["Authorization"] = "Token " .. reqs[i][2]})
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("overall (wrk): p50 %%.1f ms, p95 %%.1f ms, max %%.1f ms, errors %%d, %%.0f requests/s\\n",
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency.max / 1000,
    e.connect + e.read + e.write + e.status + e.timeout, summary.requests / (summary.duration / 1e6)))
  io.write(string.format("requests %%d\\n", summary.requests))
end
"""
SUMMARY = re.compile(r"p50 ([\d.]+) ms, p95 ([\d.]+) ms, max ([\d.]+) ms, errors (\d+), (\d+) requests/s")


@dataclass(frozen=True)
class WrkRun:
    summary: str  # wrk's "overall" line
    requests: int
    rps: float
    p50_ms: float
    p95_ms: float
    errors: int


def _wrk_command(port: int, mix: list[tuple[str, str]], tokens: dict[str, str], clients: int,
                 duration: float) -> tuple[list[str], str]:
    if shutil.which("wrk") is None:
        raise SystemExit("--client wrk needs wrk (apt-get install -y wrk)")
    entries = ", ".join(f'{{"{path}", "{tokens[who]}"}}' for who, path in mix)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(WRK_SCRIPT % entries)
    command = ["wrk", "-t2", f"-c{clients}", f"-d{duration}s", "--timeout", "10s", "-s", fh.name,
               f"http://127.0.0.1:{port}/"]
    return command, fh.name


def _parse(stdout: str) -> WrkRun:
    line = next((x for x in stdout.splitlines() if x.startswith("overall")), "")
    match, count = SUMMARY.search(line), re.search(r"^requests (\d+)$", stdout, re.MULTILINE)
    if match is None or count is None:
        raise RuntimeError(f"no wrk summary in {stdout!r}")
    p50, p95, _max, errors, rps = match.groups()
    if int(errors):
        print(f"  (wrk counted {errors} errors: non-2xx answers or socket errors)")
    return WrkRun(line, int(count.group(1)), float(rps), float(p50), float(p95), int(errors))


def run_wrk(port: int, mix: list[tuple[str, str]], tokens: dict[str, str], clients: int, duration: float,
            *, during: Callable[[], None] | None = None) -> WrkRun:
    """Closed-loop load from wrk: `clients` connections cycling through the same mix of requests; `during` is
    called once, a second or two into the run, while every connection is open."""
    command, script = _wrk_command(port, mix, tokens, clients, duration)
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if during is not None:
            time.sleep(min(2.0, duration / 3))
            during()
        stdout, stderr = process.communicate()
        if process.returncode:
            raise RuntimeError(f"wrk failed ({process.returncode}): {stderr}")
    finally:
        os.unlink(script)
    return _parse(stdout)


def connections_by_pid(port: int) -> Counter[int]:
    """Established connections to the server's port, by the process holding them (`ss -tnp`)."""
    out = subprocess.run(["ss", "-tnpH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=False).stdout
    return Counter(int(pid) for pid in re.findall(r"pid=(\d+)", out))


def backend_pids(db: str) -> list[int]:
    """The PostgreSQL backends connected to the benchmark's database, this connection's excepted."""
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                            "AND pid <> pg_backend_pid()").fetchall()
    return [pid for (pid,) in rows]


@dataclass(frozen=True)
class Round:
    label: str
    wrk: WrkRun
    seconds: float
    load_before: float  # 1-minute load average
    load_after: float
    worker_cpu: tuple[float, ...]  # CPU seconds of each gunicorn worker
    backend_cpu: float  # CPU seconds of the benchmark database's PostgreSQL backends
    wrk_cpu: float
    others_cpu: float  # CPU seconds every other process on the machine spent in the round
    steal: float  # CPU seconds the hypervisor gave to other guests
    connections: tuple[int, ...]  # wrk's connections held by each worker

    @property
    def server_ms(self) -> float:
        """Gunicorn and PostgreSQL CPU milliseconds an answer."""
        return (sum(self.worker_cpu) + self.backend_cpu) * 1000 / max(1, self.wrk.requests)

    def line(self) -> str:
        cores = (sum(self.worker_cpu) + self.backend_cpu) / self.seconds
        return (
            f"{self.label:7} {self.wrk.rps:4.0f} requests/s, p50 {self.wrk.p50_ms:5.1f} ms, p95 {self.wrk.p95_ms:5.1f}"
            f" ms | load {self.load_before:.2f} -> {self.load_after:.2f} | server CPU {self.server_ms:.2f} ms an "
            f"answer ({cores:.2f} cores: workers {' + '.join(f'{c:.1f}' for c in self.worker_cpu)} s, PostgreSQL "
            f"{self.backend_cpu:.1f} s) | wrk {self.wrk_cpu:.1f} s, other processes {self.others_cpu:.1f} s, steal "
            f"{self.steal:.1f} s | connections per worker {'/'.join(map(str, self.connections))}"
        )


def measure_round(label: str, port: int, master: int, db: str, mix: list[tuple[str, str]], tokens: dict[str, str],
                  clients: int, duration: float) -> Round:
    """One wrk run with the CPU every party spent in it."""
    workers = sorted(children(master))
    backends = backend_pids(db)
    split: Counter[int] = Counter()

    def sample() -> None:
        split.update(connections_by_pid(port))

    load = os.getloadavg()[0]
    before = {pid: cpu_seconds(pid) for pid in (*workers, *backends)}
    busy0, steal0 = machine_cpu()
    wrk0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    run = run_wrk(port, mix, tokens, clients, duration, during=sample)
    seconds = time.monotonic() - t0
    wrk1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1, steal1 = machine_cpu()
    # A backend that started during the round (a thread's first query) counts from zero.
    backends = sorted({*backends, *backend_pids(db)})
    after = {pid: cpu_seconds(pid) for pid in (*workers, *backends)}
    spent = {pid: after[pid] - before.get(pid, 0.0) for pid in after}
    worker_cpu = tuple(spent[pid] for pid in workers)
    backend_cpu = sum(spent[pid] for pid in backends)
    wrk_cpu = (wrk1.ru_utime + wrk1.ru_stime) - (wrk0.ru_utime + wrk0.ru_stime)
    others = (busy1 - busy0) - (steal1 - steal0) - sum(worker_cpu) - backend_cpu - wrk_cpu
    return Round(label, run, seconds, load, os.getloadavg()[0], worker_cpu, backend_cpu, wrk_cpu, max(0.0, others),
                 steal1 - steal0, tuple(split.get(pid, 0) for pid in workers))


def compare_trivial(port: int, master: int, db: str, mix: list[tuple[str, str]], tokens: dict[str, str],
                    trivial: str, *, clients: int, duration: float, rounds: int, warmup: float) -> None:
    """The trivial endpoint against the usage mix on one gunicorn: a warm-up run of each (not counted), then
    `rounds` pairs in ABBA order (trivial-usage, usage-trivial, ...), so a drift over the run (a process warming
    up, another job starting) weighs on both equally; prints every round and the ratio of the medians."""
    loads = {"trivial": [("staff", trivial)], "usage": mix}
    if warmup > 0:
        for label in ("trivial", "usage"):
            print(f"warm-up {measure_round(label, port, master, db, loads[label], tokens, clients, warmup).line()}",
                  flush=True)
    measured: dict[str, list[Round]] = {"trivial": [], "usage": []}
    for n in range(rounds):
        for label in ("trivial", "usage") if n % 2 == 0 else ("usage", "trivial"):
            r = measure_round(label, port, master, db, loads[label], tokens, clients, duration)
            measured[label].append(r)
            print(f"round {n + 1} {r.line()}", flush=True)
    t_rps = [r.wrk.rps for r in measured["trivial"]]
    u_rps = [r.wrk.rps for r in measured["usage"]]
    t, u = statistics.median(t_rps), statistics.median(u_rps)
    pairs = [b / a for a, b in zip(t_rps, u_rps, strict=True)]
    t_ms = statistics.median(r.server_ms for r in measured["trivial"])
    u_ms = statistics.median(r.server_ms for r in measured["usage"])
    print(f"\ntrivial {trivial}: {' '.join(f'{v:.0f}' for v in t_rps)} requests/s (median {t:.0f})")
    print(f"usage mix, uncached: {' '.join(f'{v:.0f}' for v in u_rps)} requests/s (median {u:.0f})")
    print(f"usage / trivial by round: {', '.join(f'{p:.1%}' for p in pairs)}")
    print(f"server CPU an answer (gunicorn + PostgreSQL, medians): trivial {t_ms:.2f} ms, usage {u_ms:.2f} ms, "
          f"trivial / usage {t_ms / u_ms:.1%}")
    print(f"usage / trivial = {u / t:.1%} (goal: at least 60 %)")
