"""python manage.py demo [--scenario demo] [--days N] [--seed 0]: seed the embedded demo.

Serves the simulated cluster's Kubernetes API and Prometheus on loopback ports, registers the cluster like
any other (a kubeconfig and a Prometheus URL), sets demo prices, and collects the period through the
production path (`apps.ingest.services.collect_cluster`, reading the simulated Prometheus with its
`PrometheusSource`), one UTC day per call, and replays the hourly capacity and queue history.

The period is the previous full ISO week and the current one (from Monday 00:00 UTC of the previous week), so
the previous week is final: the archive then holds its final weekly report, the current week's provisional one,
and the previous week restated once the demo's cloud bill is imported (the billed basis changes its figures).
`--days N` collects the last N days instead (the tests' short demos; no report editions unless a week is final).

`--serve HOST:PORT` (`make run`) is the progressive demo: it collects the newest hours first (`--first-hours`, the
overview's latest day), starts the dashboard (`runserver --noreload` in a child process) and prints where and how to
sign in, then collects the older hours newest first while the pages are served (their period bar says how many
hours are collected so far), makes the report editions and imports the bill, and keeps serving until Ctrl-C.

Where the platform can fork, each server runs in a process of its own and two worker processes (this one
and a fork) share the days of collection and history, so the demo uses every core.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import math
import multiprocessing
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import groupby, zip_longest

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from apps.common.commands import time_option
from apps.common.timeutils import hours_between
from apps.inventory.models import Cluster, GpuPrice
from apps.inventory.observations import ClusterSnapshot

# List prices per GPU-hour used only by the demo (a plausible cloud on-demand order of magnitude).
DEMO_PRICES = {
    "NVIDIA-H100-80GB-HBM3": "4.00",
    "NVIDIA-A100-SXM4-80GB": "2.50",
    "NVIDIA-A100-80GB-PCIe": "2.20",
    "NVIDIA-L4": "0.80",
    "NVIDIA-A30": "1.10",
    "Tesla-T4": "0.40",
}
# Scrape interval of the simulated Prometheus. Activity changes every 5 minutes and the collector's
# history subqueries step 30 s, so 60 s loses nothing the ledger reads.
SCRAPE_SECONDS = 60
# Worker processes sharing the collection and history days (the simulated servers run in two more).
WORKERS = 2
# `--serve`: the hours collected before the dashboard starts (the newest ones; bench/README.md "bench/demo_startup").
FIRST_HOURS = 12


@dataclasses.dataclass
class Tally:
    """What the workers did: buckets written, failures (hour -> error), Prometheus queries, snapshots."""

    written: int = 0
    failed: dict = dataclasses.field(default_factory=dict)
    queries: int = 0
    snapshots: int = 0

    def add(self, other: Tally) -> None:
        self.written += other.written
        self.failed.update(other.failed)
        self.queries += other.queries
        self.snapshots += other.snapshots


class Command(BaseCommand):
    help = "Seed the embedded demo: a simulated cluster and a week of ledger collected from it."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--scenario", default="demo")
        parser.add_argument("--days", type=int, default=None,
                            help="collect the last N days (default: the previous full ISO week and the current one)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--with-dra", action=argparse.BooleanOptionalAction, default=None,
                            help="demo scenario only: with (--with-dra) or without (--no-with-dra) its DRA node "
                                 "group and HAMi node (default: devtools.simulator.scenarios.DEMO_WITH_DRA, on)")
        parser.add_argument("--now", help="ISO 8601 time (UTC unless it has an offset) to act as (default: now): the "
                                          "simulated world ends and the collection stops there")
        parser.add_argument("--serve", metavar="HOST:PORT",
                            help="progressive: serve the dashboard here (runserver, a child process) once the newest "
                                 "hours are collected, collect the older ones meanwhile, keep serving until Ctrl-C")
        parser.add_argument("--first-hours", type=int, default=FIRST_HOURS,
                            help=f"with --serve: the newest hours collected before serving (default {FIRST_HOURS})")
        parser.add_argument("--open", action="store_true", help="with --serve: open a web browser on the dashboard")

    def handle(self, *args, **opts):  # type: ignore[no-untyped-def]
        if opts["days"] is not None and opts["days"] < 1:
            raise CommandError("--days must be at least 1")
        if opts.get("first_hours", FIRST_HOURS) < 1:
            raise CommandError("--first-hours must be at least 1")
        # `kill -USR1 <pid>` prints every thread's stack to stderr: a demo that seems stuck (or a test waiting on
        # one, tests/devtools/test_demo.py) says where it is.
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        # Django's debug cursor would keep (and on SQLite re-quote, one extra query each) every statement.
        debug, settings.DEBUG = settings.DEBUG, False
        try:
            self._demo(opts)
        except KeyboardInterrupt:  # Ctrl-C while collecting: the web server and the workers are stopped by now
            raise CommandError("stopped by Ctrl-C", returncode=130) from None
        finally:
            settings.DEBUG = debug

    def _demo(self, opts: dict) -> None:
        from devtools.simulator.k8s_api import SimServer
        from devtools.simulator.prometheus_api import PrometheusServer, SimulatedTSDB
        from devtools.simulator.scenarios import build_scenario

        started = time.monotonic()
        _bypass_proxies_for_loopback()
        now = time_option("now", opts.get("now")) or datetime.now(UTC)
        end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        since = demo_since(now, opts["days"])
        # The simulated world starts a day before the collection (so its first hour has a past), in whole days: the
        # same world for the same `end` and days (the tests pin `--days N`'s, built with N + 1).
        days = opts["days"] if opts["days"] is not None else math.ceil((end - since) / timedelta(days=1))
        try:
            scenario = build_scenario(opts["scenario"], seed=opts["seed"], end=end, days=days + 1,
                                      with_dra=opts.get("with_dra"))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        _sqlite_commits_without_fsync()  # after the arguments are known good: a refused one touches no database
        hours = hours_between(since, now)
        # --serve: the newest hours first (served as soon as they are in), the older ones while the pages are served.
        first = hours[-opts["first_hours"]:] if opts.get("serve") else hours
        rest = hours[:len(hours) - len(first)]
        # Bound here, served by whichever process serves them (no thread may run before the forks).
        servers = Servers(SimServer(scenario, "127.0.0.1", 0),
                          PrometheusServer(SimulatedTSDB(scenario, step=SCRAPE_SECONDS), "127.0.0.1", 0))
        web: Web | None = None
        try:
            servers.kube.set_time(now)
            kubeconfig = settings.VAR_DIR / f"{scenario.cluster_name}.kubeconfig"
            servers.kube.write_kubeconfig(str(kubeconfig))
            cluster, _ = Cluster.objects.update_or_create(
                name=scenario.cluster_name,
                defaults={"source": Cluster.Source.SIMULATOR, "kubeconfig_path": str(kubeconfig),
                          "prometheus_url": servers.prometheus.url},
            )
            for model, usd in DEMO_PRICES.items():
                if not GpuPrice.objects.filter(gpu_model=model).exists():
                    GpuPrice.objects.create(gpu_model=model, usd_per_gpu_hour=Decimal(usd),
                                            effective_from=since.date() - timedelta(days=1))
            self.stdout.write(f"collecting {len(hours)} hours of {cluster.name} from the simulated Kubernetes API "
                              f"({servers.kube.url}) and Prometheus ({servers.prometheus.url}), and replaying "
                              f"{len(_snapshots(hours, now))} hourly capacity and queue snapshots"
                              + (f"; the newest {len(first)} first" if rest else ""))
            self.stdout.flush()
            servers.start()
            _preload(cluster)
            workers = Workers(cluster, servers.kube.url, now, len(hours))
            dra = bool(scenario.dra_versions)
            if opts.get("serve"):  # started now, so its start overlaps the first hours' collection; no user yet
                web = Web(opts["serve"])
                signal.signal(signal.SIGTERM, _interrupted)  # `kill`: stop the web server too, as Ctrl-C does
                web.launch()
            tally = run_tasks(_tasks(cluster, servers.kube.url, first, now, dra, boundary=bool(rest)), workers)
            if web is not None:
                password = self._demo_user(say=False)
                self._serving(web, password, len(first), len(hours), since, opts.get("open", False))
            if rest:
                if dra:  # the claims are read again from the period's start, oldest first, as the full demo does
                    forget_observations(cluster)
                tally.add(run_tasks(_tasks(cluster, servers.kube.url, rest, now, dra, newest_first=True,
                                           reread=first if dra else ()), workers))
        except BaseException:
            if web is not None:
                web.stop()
            raise
        finally:
            servers.stop()
        self.stdout.write(f"capacity and queue history recorded hourly for the period ({tally.snapshots} snapshots)")
        self.stdout.write(f"{cluster.name}: {tally.written} buckets written, {len(tally.failed)} failed, "
                          f"{tally.queries} Prometheus queries, {time.monotonic() - started:.1f} s")
        try:
            final = self._final_editions(now)
            self._finance(cluster, now)
            if final:
                self._restated(now)
            if web is None:
                self._demo_user()
            if tally.failed:
                raise CommandError(f"demo collection had failures: {next(iter(tally.failed.values()))}")
            if web is not None:
                self.stdout.write(self.style.SUCCESS(
                    f"the demo is complete ({time.monotonic() - started:.0f} s): {len(hours)} hours collected"
                    + (", /reports/ now lists the final week " + final_week(now) if final else "")
                    + f"; serving {web.url} until Ctrl-C"))
                self.stdout.flush()
                try:
                    web.wait()
                except KeyboardInterrupt:
                    self.stdout.write("stopped")
        finally:
            if web is not None:
                web.stop()

    def _serving(self, web: Web, password: str | None, collected: int, total: int, since: datetime,
                 browse: bool) -> None:
        """The dashboard answering once the newest hours are in; where and how to sign in, and what comes next."""
        web.ready()
        site = web.url
        who = f"as demo / {password}" if password else "as one of this database's users"
        self.stdout.write(self.style.SUCCESS(f"serving {site}: sign in {who}"))
        if collected < total:
            self.stdout.write(f"the newest {collected} of {total} hours are collected; collecting the older ones from "
                              f"{since:%Y-%m-%d %H:00} UTC meanwhile (the pages say how many hours they hold), then "
                              "the report editions and the cloud bill")
        self.stdout.flush()
        if browse:
            import webbrowser

            webbrowser.open(site)

    def _finance(self, cluster: Cluster, now: datetime) -> None:
        """The demo's cloud bill (imported like any FOCUS file) and weekly team budgets (devtools/demo_bill.py)."""
        from apps.billing.services import import_bill
        from devtools.demo_bill import demo_bill, demo_budgets

        result = import_bill(demo_bill(cluster, DEMO_PRICES), f"demo-focus-{now:%Y%m%d%H}.csv")
        bill = result.bill
        self.stdout.write(f"cloud bill {bill.name}: {bill.lines_kept} GPU node lines, {bill.lines_matched} matched to "
                          f"nodes (/reconciliation/)")
        budgets = demo_budgets(cluster, now)
        self.stdout.write(f"weekly budgets: {', '.join(budgets) or 'none'} (/budgets/)")

    def _final_editions(self, now: datetime) -> bool:
        """When the previous ISO week is final (the default period), the fleet's weekly editions (scope `all`) as
        `send_reports` makes them, with no subscription to e-mail: the previous week's final edition and the current
        week's provisional one. Returns whether the previous week was final (a `--days` demo's seldom is)."""
        from apps.reports.content import Scope
        from apps.reports.periods import WEEKLY, last_complete, ledger_stamp, period_state, week
        from apps.reports.services import current_edition

        previous = last_complete(WEEKLY, now)
        if not period_state(previous, now).final:
            return False
        made: list[str] = []
        for period in (previous, week(now)):
            state = period_state(period, now)
            current_edition(period, Scope(None), state, now=now, stamp=ledger_stamp(period), made=made)
        for edition in made:
            self.stdout.write(f"report edition {edition} (/reports/)")
        return True

    def _restated(self, now: datetime) -> None:
        """The bill just imported covers the final week: `send_reports`' restatement check finds its figures
        changed (the billed basis) and restates it."""
        from apps.reports.periods import WEEKLY
        from apps.reports.services import restate_closed

        for outcome in restate_closed(now=now, kinds=(WEEKLY,)):
            for edition in outcome.editions:
                self.stdout.write(f"report edition {edition}, restated after the bill import (/reports/)")

    def _demo_user(self, say: bool = True) -> str | None:
        """A first sign-in for the dashboard, only on a database with no users yet (never touches real ones).
        Returns its password (None: users existed); `say`: print where and how to sign in."""
        from django.contrib.auth import get_user_model

        users = get_user_model()
        if users.objects.exists():
            return None
        password = secrets.token_urlsafe(12)
        users.objects.create_user("demo", password=password, is_staff=True)
        site = settings.GPUFINOPS_BASE_URL.rstrip("/") + "/"  # `make run` passes the address it serves
        if say:
            self.stdout.write(self.style.SUCCESS(f"sign in at {site} as demo / {password}"))
        return password


def demo_since(now: datetime, days: int | None) -> datetime:
    """Where the demo's collection starts: `days` before `now`, or by default Monday 00:00 UTC of the previous ISO
    week (the one period rule's last complete week), so one whole week is final."""
    from apps.common.periods import WEEKLY, last_complete

    if days is not None:
        return now - timedelta(days=days)
    return last_complete(WEEKLY, now).start


def final_week(now: datetime) -> str:
    """The name of the last complete ISO week (the demo's final one), e.g. 2026-W48."""
    from apps.common.periods import WEEKLY, last_complete

    return last_complete(WEEKLY, now).label


def _snapshots(hours: list[datetime], now: datetime) -> list[datetime]:
    """The hourly capacity and queue snapshots of these hours: one as of each hour's end that has passed."""
    return [at for at in (h + timedelta(hours=1) for h in hours) if at <= now]


def _tasks(cluster: Cluster, kube_url: str, hours: list[datetime], now: datetime, dra: bool, *,
           boundary: bool = False, newest_first: bool = False, reread: Iterable[datetime] = ()) -> Iterable[Task]:
    """The tasks that collect `hours` (a stretch of the period) and replay their history.

    `boundary`: the stretch is the newest of a longer period, so with DRA its claims are read from its first hour's
    start (the previous hour's snapshot, whose history is the older stretch's) and a claim held before the stretch
    counts from its first hour. `newest_first`: the ledger days newest first (the older stretch of `--serve`, whose
    pages fill in from the served hours backwards). `reread`: with DRA, hours whose claims are read again after
    these, oldest first (the newer stretch already collected: the observations end as the whole period's do)."""
    ledger, history = _by_day("ledger", hours), _by_day("history", _snapshots(hours, now))
    if newest_first:
        ledger, history = ledger[::-1], history[::-1]
    if not dra:
        return _schedule(ledger, history)
    if newest_first:  # the claims are read oldest first whatever the ledger's order
        history = history[::-1]
    before = [hours[0]] if boundary else []
    return _claims_first(cluster, kube_url, ledger, history, before=before, after=_snapshots(list(reread), now))


def forget_observations(cluster: Cluster) -> None:
    """The pod and claim observations the newest stretch's claims replay made, before the whole period's is read
    from its start (an observation read out of order would end, or start, a stretch at the wrong hour). Only the
    collection reads them (`apps.usage.inputs`): the pages, built from the written buckets, never see the gap."""
    from apps.usage.models import ClaimObservation, PodObservation

    PodObservation.objects.filter(cluster=cluster).delete()
    ClaimObservation.objects.filter(cluster=cluster).delete()


def _preload(cluster: Cluster) -> None:
    """Import the collectors and read the simulated cluster once here, before the workers fork, rather than once in
    every worker: the Kubernetes client is large, and loads each API class and builds each method's validators on
    first use (a snapshot's first read costs about 1.2 CPU-s, the next ones 0.02; the read writes nothing)."""
    from apps.ingest import services  # noqa: F401
    from apps.ingest.collectors import prometheus  # noqa: F401
    from apps.ingest.collectors.kubernetes import read_snapshot

    read_snapshot(cluster)


# A worker's task: ("ledger" | "history", the hours of one UTC day, for history the snapshots already read of them).
Task = tuple[str, list[datetime], list[ClusterSnapshot] | None]


def _by_day(kind: str, hours: list[datetime]) -> list[Task]:
    return [(kind, list(day), None) for _date, day in groupby(hours, key=lambda h: h.date())]


def _claims_first(cluster: Cluster, kube_url: str, ledger: list[Task], history: list[Task], *,
                  before: Iterable[datetime] = (), after: Iterable[datetime] = ()) -> Iterator[Task]:
    """With DRA: the pod and claim observations of every past hour, oldest first, before any bucket is collected
    (`replay_claims`); each day's reads go on as that day's history task, so a worker records the side snapshots
    while this process reads the next day, and the simulated API is read once per hour. Then the ledger days.
    `before`, `after`: hours whose claims are read (only) before and after those."""
    replay_claims(cluster, kube_url, list(before))
    for _kind, hours, _none in history:
        read = replay_claims(cluster, kube_url, hours)
        yield ("history", hours, [read[at] for at in hours])
    replay_claims(cluster, kube_url, list(after))
    yield from ledger


def _schedule(ledger: list[Task], history: list[Task]) -> list[Task]:
    """One task per UTC day and kind, interleaved so two workers stay busy, each day's history a task ahead of its
    ledger (two tasks ahead: the two workers start on history): a snapshot recorded before its hour's bucket leaves
    the snapshot kinds of findings to the bucket's write (`apps.findings.services.record_snapshot`) instead of both
    computing them. The history tasks are the shorter ones, so they stay ahead."""
    return history[:2] + [task for pair in zip_longest(ledger, history[2:]) for task in pair if task]


class Workers:
    """What a worker needs to run a task: the cluster, where the simulated API is, the collection's "now",
    and a progress counter shared by the workers."""

    def __init__(self, cluster: Cluster, kube_url: str, now: datetime, total: int):
        self.cluster, self.kube_url, self.now, self.total = cluster, kube_url, now, total
        self.done = multiprocessing.Value("i", 0)

    def run(self, kind: str, hours: list[datetime], read: list[ClusterSnapshot] | None = None) -> Tally:
        from apps.ingest import services

        if kind == "history":
            known = dict(zip(hours, read, strict=True)) if read is not None else None
            return Tally(snapshots=replay_history(self.cluster, self.kube_url, hours, known))
        report = services.collect_cluster(self.cluster, hours, now=self.now, progress=self.progress)
        return Tally(written=len(report.written), failed={h.isoformat(): e for h, e in report.failed.items()},
                     queries=report.queries)

    def progress(self, message: str) -> None:
        with self.done.get_lock():
            self.done.value += 1
            n = self.done.value
        # collect_cluster numbers the buckets of its call; the demo numbers those of the period.
        print(f"hour {n} of {self.total}: {message.split('] ', 1)[-1]}", file=sys.stderr, flush=True)


def run_tasks(tasks: Iterable[Task], workers: Workers) -> Tally:
    """The tasks, shared by this process and a forked one when the platform can fork. This process produces them
    (a generator may work between two tasks: `_claims_first`) while the forked worker starts on the first ones,
    then joins in."""
    ctx = _fork_context()
    tally = Tally()
    if ctx is None:
        for task in tasks:
            tally.add(workers.run(*task))
        return tally
    # A Queue, not a SimpleQueue: its feeder thread buffers, so putting a day of snapshots never waits for a busy
    # worker to read the pipe. Every task is read before this process returns, except after a failure, when the
    # workers are gone and nothing should wait to flush the pipe to them.
    queue = ctx.Queue()
    queue.cancel_join_thread()
    # Each process opens its own connection; settings make SQLite transactions IMMEDIATE, so the workers'
    # writes wait for each other instead of failing with "database is locked".
    connections.close_all()
    children = []
    for _ in range(WORKERS - 1):
        receiver, sender = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_child, args=(_work, (queue, workers), sender), daemon=True)
        child.start()
        sender.close()
        children.append((child, receiver))
    errors = []
    try:
        for task in tasks:
            queue.put(task)
        for _ in range(WORKERS):
            queue.put(None)
        tally.add(_work(queue, workers))
        for child, receiver in children:
            try:
                status, value = receiver.recv()
            except EOFError:
                status, value = "error", f"the worker process died (exit code {child.exitcode})"
            child.join()
            if status == "ok":
                tally.add(value)
            else:
                errors.append(value)
    finally:
        for child, _receiver in children:
            if child.is_alive():
                child.terminate()
                child.join()
    if errors:
        raise CommandError("a demo worker failed:\n" + "\n".join(errors))
    return tally


def _work(queue, workers: Workers) -> Tally:  # type: ignore[no-untyped-def]
    tally = Tally()
    while (task := queue.get()) is not None:
        tally.add(workers.run(*task))
    return tally


def _child(fn: Callable, args: tuple, sender) -> None:  # type: ignore[no-untyped-def]
    try:
        sender.send(("ok", fn(*args)))
    except BaseException:
        sender.send(("error", traceback.format_exc()))
    finally:
        connections.close_all()


def replay_history(cluster: Cluster, kube_url: str, hours: list[datetime],
                   read: Mapping[datetime, ClusterSnapshot] | None = None) -> int:
    """Hourly capacity and queue snapshots, each read from the simulated Kubernetes API as of its hour.

    A live installation builds this history one collection at a time; the demo replays it so the
    fragmentation chart has a past. Only the side snapshots are recorded (nodes and pod observations
    are the ledger collection's). `read`: snapshots of some of these hours already read (as of the same hour)."""
    from apps.ingest import services

    read = read or {}
    unread = iter(_snapshots_at(cluster, kube_url, [at for at in hours if at not in read]))
    for at in hours:
        services.record_side_snapshots(cluster, read[at] if at in read else next(unread))
    return len(hours)


def _snapshots_at(cluster: Cluster, kube_url: str, hours: list[datetime]) -> Iterator[ClusterSnapshot]:
    """The simulated cluster read through the production collector as of each past hour (its API frozen there)."""
    from kubernetes import client

    from apps.ingest.collectors.kubernetes import read_snapshot

    cfg = client.Configuration()
    cfg.api_key = {"authorization": "sim-token"}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    api_client = client.ApiClient(configuration=cfg)
    for at in hours:
        cfg.host = f"{kube_url}/at/{at.timestamp():.0f}"
        yield dataclasses.replace(read_snapshot(cluster, api_client), taken_at=at)


def replay_claims(cluster: Cluster, kube_url: str, hours: list[datetime]) -> dict[datetime, ClusterSnapshot]:
    """Pod and claim observations read hourly through the period, before its buckets are collected.

    The Kubernetes API keeps no allocation history and deletes a template's claim with its pod, so a live
    installation learns which devices a pod held (and how long a claim sat allocated with no consumer) from its
    collections every 5 minutes. The demo collects its week at once: it reads the simulated API as of each past
    hour first (hourly, so an idle claim's hours are to the hour). Returns the snapshots read, by hour."""
    from django.db import transaction

    from apps.usage import services as ledger

    read = {}
    for snap in _snapshots_at(cluster, kube_url, hours):
        with transaction.atomic():
            ledger.lock_cluster(cluster)
            ledger.record_pod_observations(cluster, snap)
        read[snap.taken_at] = snap
    return read


def _bypass_proxies_for_loopback() -> None:
    """The simulated servers are on loopback: never route them through a proxy from the environment (and
    requests then skips scanning the environment for proxies on every Prometheus query)."""
    hosts = [h for h in os.environ.get("NO_PROXY", os.environ.get("no_proxy", "")).split(",") if h]
    for host in ("127.0.0.1", "localhost"):
        if host not in hosts:
            hosts.append(host)
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = ",".join(hosts)


def _sqlite_commits_without_fsync() -> None:
    """On SQLite (WAL, gpufinops.settings) the demo's connections commit without waiting for the disk
    (synchronous=NORMAL: still consistent after a crash, only the last transactions may be lost on power loss): the
    demo writes in thousands of small transactions, each of which would otherwise wait for an fsync."""
    from django.db.backends.signals import connection_created

    def pragma(sender, connection, **kwargs):  # type: ignore[no-untyped-def]
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=NORMAL")

    connection_created.connect(pragma, weak=False, dispatch_uid="gpufinops-demo-sqlite-synchronous")
    for conn in connections.all():
        if conn.connection is not None:  # already open in this process: the signal has been sent
            pragma(None, conn)


def _fork_context():  # type: ignore[no-untyped-def]
    try:
        return multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform: everything runs in this process
        return None


class Servers:
    """The simulated Kubernetes API and Prometheus, each served from a forked process when possible (a Python
    process that serves and queries itself spends much of its time waiting for its own interpreter lock)."""

    def __init__(self, kube, prometheus):  # type: ignore[no-untyped-def]
        self.kube, self.prometheus = kube, prometheus
        self.processes: list = []

    def start(self) -> None:
        ctx = _fork_context()
        if ctx is None:
            self.kube.start()
            self.prometheus.start()
            return
        connections.close_all()  # the children never touch the database
        for server in (self.kube, self.prometheus):
            process = ctx.Process(target=_serve, args=(server,), daemon=True)
            process.start()
            self.processes.append(process)
        for server in (self.kube, self.prometheus):  # served by the children; this process keeps no copy
            server.httpd.server_close()

    def stop(self) -> None:
        if self.processes:
            for process in self.processes:
                if process.is_alive():
                    process.terminate()
                    process.join()
            return
        for server in (self.kube, self.prometheus):
            if server.thread.is_alive():
                server.stop()
            else:
                server.httpd.server_close()


def _interrupted(signum, frame) -> None:  # type: ignore[no-untyped-def]
    raise KeyboardInterrupt


class Web:
    """`--serve`: the dashboard served by `manage.py runserver --noreload` in a child process (its own interpreter:
    it reads the database while this one writes; SQLite's WAL and busy timeout, gpufinops.settings). The system
    checks already ran in this command."""

    def __init__(self, address: str):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"--serve wants HOST:PORT, not {address!r}")
        self.host, self.port = host, int(port)
        self.url = f"http://{host}:{port}/"
        self.process: subprocess.Popen | None = None

    def launch(self) -> None:
        manage = settings.BASE_DIR / "manage.py"
        self.process = subprocess.Popen([sys.executable, str(manage), "runserver", "--noreload", "--skip-checks",
                                         f"{self.host}:{self.port}"], stdout=subprocess.DEVNULL)  # its banner

    def ready(self, timeout: float = 60.0) -> None:
        """Returns once the server accepts connections."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise CommandError(f"the web server exited (code {self.process.returncode}): is {self.host}:"
                                   f"{self.port} free?")
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise CommandError(f"the web server did not answer on {self.url} within {timeout:.0f} s") from None
                time.sleep(0.1)

    def wait(self) -> None:
        """Until the server ends (Ctrl-C reaches both: they share the terminal's process group)."""
        if self.process is not None:
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _serve(server) -> None:  # type: ignore[no-untyped-def]
    server.start()
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C reaches the whole process group: the demo says it stopped
        server.thread.join()
