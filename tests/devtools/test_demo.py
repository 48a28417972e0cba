"""`manage.py demo`: the production collector reads the simulated cluster, and the history is replayed."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from apps.capacity.models import CapacityCollection
from apps.inventory.models import Cluster, GpuPrice
from apps.queues.models import QueueCollection
from apps.usage.models import Bucket, PodHour


@pytest.fixture
def demo_run(transactional_db, settings, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    settings.VAR_DIR = tmp_path
    for name in ("NO_PROXY", "no_proxy"):  # the command sets them for its loopback servers
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    call_command("demo", "--days", "1", stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.slow
def test_it_collects_a_day_through_the_production_path(demo_run):
    cluster = Cluster.objects.get(name="sim-demo")
    assert cluster.prometheus_url.startswith("http://127.0.0.1:")  # the simulated Prometheus, like any other
    assert cluster.kubeconfig_path.endswith("sim-demo.kubeconfig")
    buckets = Bucket.objects.filter(cluster=cluster)
    assert buckets.count() in (24, 25) and all(b.status == Bucket.Status.OK for b in buckets)
    assert PodHour.objects.filter(cluster=cluster).count() > 24 * 30
    assert GpuPrice.objects.filter(gpu_model="NVIDIA-H100-80GB-HBM3").exists()
    # the capacity and queue history: one snapshot per hour, plus the collection's own
    assert CapacityCollection.objects.filter(cluster=cluster).count() >= 24
    assert QueueCollection.objects.filter(cluster=cluster).count() >= 24
    assert "0 failed" in demo_run and "Prometheus queries" in demo_run
    assert get_user_model().objects.filter(username="demo", is_staff=True).exists()
    assert "as demo / " in demo_run
    # The finance pages have something to show: the cloud bill matched to the nodes, and weekly budgets.
    from apps.billing.selectors import reconciliation
    from apps.budgets.models import Budget

    month = reconciliation(f"{Bucket.objects.filter(cluster=cluster).latest('hour').hour:%Y-%m}")
    (sim,) = month.clusters
    assert sim.billed_cost > 0 and sim.price_card_cost > 0
    assert [n.node for n in sim.nodes_without_bill] == ["l4-noplugin-0"]
    assert [u.resource_id for u in month.unmatched] == ["i-0ffffffffffffffff"]
    assert Budget.objects.filter(period="weekly").count() >= 3 and "(/budgets/)" in demo_run


# A Monday 01:30 UTC: the default period is the previous ISO week (2026-W48, 168 hours) and the current week's first
# two hours, so W48 is final. The tiny scenario (3 nodes) keeps a week of collection short.
MONDAY = datetime(2026, 11, 30, 1, 30, tzinfo=UTC)


@pytest.mark.slow
def test_the_default_period_leaves_a_final_a_provisional_and_a_restated_weekly_report(
        transactional_db, settings, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    from apps.reports.archive import page
    from apps.reports.periods import period_state, week

    settings.VAR_DIR = tmp_path
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    call_command("demo", "--scenario", "tiny", "--now", MONDAY.isoformat(), stdout=out, stderr=io.StringIO())
    hours = Bucket.objects.order_by("hour").values_list("hour", flat=True)
    assert hours[0] == datetime(2026, 11, 23, tzinfo=UTC) and len(hours) == 7 * 24 + 2  # from W48's Monday 00:00
    assert period_state(week(hours[0]), MONDAY).final
    archive = page(get_user_model().objects.get(username="demo"), None, now=MONDAY)
    editions = [(e["period"], e["status"], e["version"]) for e in archive["editions"]]
    assert editions == [("2026-W49", "provisional", 1), ("2026-W48", "restated", 2), ("2026-W48", "final", 1)]
    restated = next(e for e in archive["editions"] if e["status"] == "restated")
    assert restated["previous_version"] == 1
    assert not [d for d in archive["due"] if d["kind"] == "weekly"]  # the last complete week has its final edition
    assert "2026-W48 all v1 final" in out.getvalue() and "2026-W48 all v2 restated" in out.getvalue()


def test_the_default_period_starts_on_the_previous_iso_weeks_monday():
    from devtools.management.commands.demo import demo_since

    assert demo_since(MONDAY, None) == datetime(2026, 11, 23, tzinfo=UTC)
    sunday = datetime(2026, 12, 6, 23, 59, tzinfo=UTC)
    assert demo_since(sunday, None) == datetime(2026, 11, 23, tzinfo=UTC)
    assert demo_since(MONDAY, 2) == MONDAY - timedelta(days=2)


def test_it_refuses_a_period_shorter_than_a_day_or_an_unknown_scenario():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="at least 1"):
        call_command("demo", "--days", "0")
    with pytest.raises(CommandError, match="unknown scenario"):
        call_command("demo", "--scenario", "nope")


ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sign_in(url: str, password: str):  # type: ignore[no-untyped-def]
    import requests

    session = requests.Session()
    login = session.get(f"{url}/accounts/login/", timeout=60)
    assert login.status_code == 200
    done = session.post(f"{url}/accounts/login/", timeout=60, headers={"Referer": login.url},
                        data={"username": "demo", "password": password,
                              "csrfmiddlewaretoken": session.cookies.get("csrftoken")})
    assert done.status_code == 200 and "/accounts/login/" not in done.url, done.text[:500]
    return session


def _read_lines(stream, into: list[str], said) -> None:  # type: ignore[no-untyped-def]
    """Each line of `stream` into `into` as it comes, `said` set after each."""
    for line in stream:
        into.append(line)
        said.set()


# The backfill's hours between two rounds of sign-in and pages in the served demo (23 hours: about three rounds).
PAGE_ROUND_HOURS = 8


def time_after(seconds: float):  # type: ignore[no-untyped-def]
    import time

    end = time.monotonic() + seconds
    return lambda: time.monotonic() > end


LEDGER = {  # the ledger's rows and rollups, with neither ids nor collection times
    "usage_podhour": "hour, namespace, pod, pod_uid, node, team, workload, allocation_mode, gpus, held_seconds, "
                     "allocated_gpu_hours, working_sm_active, idle_sm_active, unmeasured_sm_active, cost",
    "usage_nodehour": "",  # every column but the id (ids follow the write order, which differs)
    "usage_usagehour": "",
    "usage_usageday": "",
    "usage_workloadday": "",
    "usage_bucket": "hour, status, state",
}


def _environment(var_dir, tmp_path) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """The environment of a `manage.py` run on its own SQLite database under `var_dir`."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "NO_PROXY", "no_proxy")}
    env.update(GPUFINOPS_VAR_DIR=str(var_dir), XDG_CACHE_HOME=str(tmp_path / "cache"), GPUFINOPS_DEVTOOLS="1",
               DEBUG="1")
    return env


def _migrated(var_dir, tmp_path, *, copies=()) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """The environment of a `manage.py` run on its own SQLite database under `var_dir`, migrated as `make run` does;
    each folder of `copies` gets a copy of the migrated database (a Django process and a migrate fewer each)."""
    import subprocess
    import sys

    from tests.harness.cache import copy_sqlite

    env = _environment(var_dir, tmp_path)
    subprocess.run([sys.executable, "manage.py", "migrate_cached"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    for folder in copies:
        copy_sqlite(var_dir / DATABASE_FILE, folder / DATABASE_FILE)
    return env


DATABASE_FILE = "gpufinops.sqlite3"  # under GPUFINOPS_VAR_DIR (gpufinops/settings.py)


def _ledger(var_dir) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    import sqlite3

    rows = {}
    with sqlite3.connect(var_dir / DATABASE_FILE) as db:
        for table, columns in LEDGER.items():
            columns = columns or ", ".join(c[1] for c in db.execute(f"PRAGMA table_info({table})") if c[1] != "id")
            rows[table] = sorted(map(repr, db.execute(f"SELECT {columns} FROM {table}")))  # noqa: S608
    return rows


def _synchronous_ledger(argv: list[str], var_dir, tmp_path) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """The ledger of one synchronous `demo` run (`argv`) on the migrated database under `var_dir`. Kept in the test
    cache (tests/harness/cache.py) keyed by the arguments (`--now` names the world) and every source file the demo
    runs, so a run of the suite again within the hour on the same code reads it instead of collecting the day twice;
    a changed file collects it afresh."""
    import subprocess
    import sys

    import django

    from tests.harness import cache

    def collect() -> dict[str, list[str]]:
        subprocess.run(argv, cwd=ROOT, env=_environment(var_dir, tmp_path), check=True, capture_output=True)
        return _ledger(var_dir)

    return cache.pickled("demo-ledger", collect, parts=[sys.version, django.get_version(), *argv[1:]],
                         files=cache.source_files("apps", "devtools", "gpufinops"))


@pytest.mark.slow
def test_serve_signs_in_serves_pages_and_writes_the_synchronous_demos_ledger(tmp_path):
    """`make run`'s progressive demo on SQLite, as a person uses it: the dashboard answers once the newest hours are
    in, and signing in (a session written) and loading pages while the backfill writes never meets "database is
    locked" or a 500; the period bar says how many past hours are still missing; Ctrl-C stops the server too.
    Newest hours first, then the older ones newest first, with the DRA claims read again from the period's start,
    it writes the same pod-hours, node-hours, rollups and bucket states as one synchronous pass over the same world.
    (One served run checks both: each `demo --serve` costs a migrated database, three Django processes and the
    collection; 23 hours of backfill outlast a round of sign-in and four pages even on an idle machine.)"""
    import re
    import signal
    import socket
    import subprocess
    import sys
    import threading

    # A fixed `--now` for both runs (their worlds are the same), in the last hour so the pages' clock agrees.
    now = (datetime.now(UTC) - timedelta(minutes=30)).replace(minute=30, second=0, microsecond=0)
    argv = [sys.executable, "manage.py", "demo", "--days", "1", "--now", now.isoformat()]
    env = _migrated(tmp_path / "served", tmp_path, copies=[tmp_path / "plain"])
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    demo = subprocess.Popen([*argv, "--first-hours", "2", "--serve", f"127.0.0.1:{port}"], cwd=ROOT, env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out: list[str] = []
    err: list[str] = []
    said = threading.Event()  # set on each line the demo writes: the test waits for lines, never polls
    readers = [threading.Thread(target=_read_lines, args=(stream, into, said), daemon=True)
               for stream, into in ((demo.stdout, out), (demo.stderr, err))]
    for reader in readers:
        reader.start()

    def complete() -> bool:
        return any("the demo is complete" in line for line in out)

    def hours_written() -> int:  # the demo's progress, "hour N of 25: ..." on its stderr
        return max((int(m.group(1)) for line in err if (m := re.match(r"hour (\d+) of ", line))), default=0)

    try:
        deadline = time_after(300)

        def wait_until(done) -> None:  # type: ignore[no-untyped-def]
            while not done():
                assert demo.poll() is None, "".join(out + err)[-3000:]
                assert not deadline(), "".join(out + err)[-3000:]
                said.wait(1)
                said.clear()

        # The "serving" line and the next one (written together; each reaches `out` on its own).
        wait_until(lambda: any("serving " in line for line in out[:-1]))
        password = re.search(r"as demo / (\S+)", "".join(out)).group(1)  # type: ignore[union-attr]
        assert any("the newest 2 of 25 hours are collected" in line for line in out)
        loads, during, last = 0, 0, -PAGE_ROUND_HOURS
        while not complete():
            # A round of sign-in and pages each PAGE_ROUND_HOURS hours the backfill writes (its start, middle and
            # end), not back to back: each round costs the server a password hash and four pages.
            wait_until(lambda last=last: complete() or hours_written() >= last + PAGE_ROUND_HOURS)
            if complete():
                break
            last = hours_written()
            session = _sign_in(url, password)  # a session row written while the backfill writes
            for page in ("/", "/workloads/", "/data-status/", "/reports/"):
                answer = session.get(url + page, timeout=120)
                assert answer.status_code == 200, (page, answer.status_code, answer.text[:500])
                loads += 1
            if not complete():
                during += 1
                if loads == 4:  # the first round: the backfill has barely begun
                    assert "of its past hours are not collected yet" in session.get(url + "/").text
        assert during >= 1, "no page was loaded while the older hours were written"
        assert _sign_in(url, password).get(url + "/").status_code == 200
        demo.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            code = demo.wait(timeout=60)
        except subprocess.TimeoutExpired:  # say where it is stuck: the demo prints its threads' stacks on SIGUSR1
            demo.send_signal(signal.SIGUSR1)
            threading.Event().wait(2)
            pytest.fail("the demo did not stop within 60 s of Ctrl-C:\n" + "".join(out + err)[-6000:])
        assert code == 0, "".join(out + err)[-3000:]
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    for reader in readers:
        reader.join(timeout=10)
    text = "".join(out + err)
    assert "database is locked" not in text and "Traceback" not in text and " 500 " not in text, text[-3000:]
    assert "25 buckets written, 0 failed" in text
    with pytest.raises(OSError):  # the server went with the demo
        socket.create_connection(("127.0.0.1", port), timeout=2).close()

    served, plain = _ledger(tmp_path / "served"), _synchronous_ledger(argv, tmp_path / "plain", tmp_path)
    for table in LEDGER:
        assert plain[table], table
        assert served[table] == plain[table], table
