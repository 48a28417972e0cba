"""Shared fixtures: real PostgreSQL, Redis, Celery worker, Prometheus and SMTP (see tests/harness/).

A test that needs a service that is missing skips with the reason; with GPUFINOPS_REQUIRE_SERVICES=1 (CI)
it fails instead. The suite runs on SQLite when DATABASE_URL is unset and on PostgreSQL when it is set.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from tests.harness import cache, cpu_report, group_seconds
from tests.harness.prometheus import PrometheusServer, start_prometheus
from tests.harness.services import require_binary, require_service
from tests.harness.shared_rows import WORLD_FIXTURES, SharedRows
from tests.harness.smtp import SmtpServer, start_smtp_server
from tests.harness.worker import CeleryWorker, database_url_from_settings

# No per-example deadline: the house rule is no timing in unit tests, and on a shared 2-core machine a property test's
# example can take 300 ms, and generating data be "too slow", for reasons that are not the code's (seen under
# load 15: a FlakyFailure and a too_slow health check).
hypothesis_settings.register_profile("gpufinops", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("gpufinops")


def pytest_configure(config: pytest.Config) -> None:
    cpu_report.register(config)  # GPUFINOPS_TEST_CPU_REPORT=FILE: each test's CPU seconds (tests/harness/cpu_report.py)
    group_seconds.register(config)  # each xdist group's seconds, for the next run's order (harness/group_seconds.py)
    # pytest-xdist (3.7+) hands groups out by test count, most first, unless told not to: a one-test module of 5 CPU-s
    # then starts last and ends the run alone. `_order_groups` below orders them by their cost instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    config.pluginmanager.register(_GroupOrder(), "gpufinops-group-order")

# ---- Database ----


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory) -> None:
    """On SQLite, put the test database in a file (not in memory) so a Celery worker process can share it."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3" and not db.get("TEST", {}).get("NAME"):
        db.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("sqlite") / "test_gpufinops.sqlite3")


@pytest.fixture(scope="session")
def django_db_keepdb(request, django_db_modify_db_settings, django_db_blocker) -> bool:
    """Keep (do not create) the test database with --reuse-db, or when it was restored from the migrated database
    cached for these migrations (tests/harness/cache.py: an SQLite file, or a PostgreSQL template database cloned):
    migrating it then only confirms it."""
    global _POSTGRES_TEMPLATE
    from django.conf import settings
    from django.db import connection

    if request.config.getvalue("reuse_db"):
        return True
    if request.config.getvalue("create_db"):
        return False
    template = cache.postgres_template()
    if template is not None:
        template.lock()  # held until django_db_setup stored the template, when this session has to make it
        _POSTGRES_TEMPLATE = template
        try:
            with django_db_blocker.unblock():
                if not template.exists():
                    return False
                template.clone_into(connection.creation._get_test_db_name())
        except BaseException:
            template.unlock()  # the other workers must not wait on a session that failed
            raise
        template.unlock()
        return True
    entry = cache.migrated_sqlite_entry()
    if entry is None or not entry.exists():
        return False
    cache.copy_sqlite(entry, Path(settings.DATABASES["default"]["TEST"]["NAME"]))
    return True


_POSTGRES_TEMPLATE: cache.PostgresTemplate | None = None


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_keepdb, django_db_blocker, request) -> Iterator[None]:
    """pytest-django's, then the migrated database cached for the next session (and the other pytest-xdist workers)
    when it was made here; a test database cloned from the PostgreSQL template is dropped at the end."""
    from django.db import connection

    entry = cache.migrated_sqlite_entry()
    if entry is not None and not entry.exists():
        cache.copy_sqlite(Path(connection.settings_dict["NAME"]), entry)
    template = _POSTGRES_TEMPLATE
    if template is not None and template.locked:
        with django_db_blocker.unblock():
            template.store_from(connection.settings_dict["NAME"])
        template.unlock()
    yield
    if template is not None and django_db_keepdb and not request.config.getvalue("reuse_db"):
        with django_db_blocker.unblock():
            template.drop_clone()


@pytest.fixture
def postgres_db(db) -> None:
    """The test database, which must be PostgreSQL (skip locally on SQLite, fail in CI)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        require_service("postgresql", "DATABASE_URL is not a postgres:// URL (the suite is running on SQLite)")


@pytest.fixture(scope="session")
def shared_rows(django_db_setup, django_db_blocker) -> Iterator[SharedRows]:
    """Worlds of rows built once and shared by consecutive tests (tests/harness/shared_rows.py)."""
    global _SHARED_ROWS
    _SHARED_ROWS = SharedRows(django_db_blocker)
    yield _SHARED_ROWS
    _SHARED_ROWS.release()
    _SHARED_ROWS = None


_SHARED_ROWS: SharedRows | None = None


@pytest.fixture(autouse=True)
def _shared_world_first(request) -> None:
    """A test's shared world is opened before any of its fixtures writes a row (before `db`'s transaction)."""
    for name in sorted(WORLD_FIXTURES.intersection(request.fixturenames)):
        request.getfixturevalue(name)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A shared world is rolled back before a test that does not use it (it never sees the world's rows)."""
    if _SHARED_ROWS is not None:
        _SHARED_ROWS.release_for(item)


@pytest.fixture(scope="session")
def test_database_url(django_db_setup, django_db_blocker) -> str:
    """DATABASE_URL of the test database (test_<name>), for subprocesses that must see the test data."""
    from django.conf import settings

    return database_url_from_settings(settings.DATABASES["default"])


# ---- Redis and Celery ----


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a reachable Redis on a test DB of its own (REDIS_URL or 127.0.0.1:6379), flushed once.

    The DB number is 15 unless another test session on this machine holds it (then 14, 13, ... 8): sessions
    run side by side without flushing each other's queues. GPUFINOPS_TEST_REDIS_DB pins a number.
    """
    import redis

    base = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379").rstrip("/")
    if base.count("/") > 2:  # REDIS_URL already names a DB number: replace it with the test DB
        base = base.rsplit("/", 1)[0]
    pinned = os.environ.get("GPUFINOPS_TEST_REDIS_DB")
    candidates = [int(pinned)] if pinned else list(range(15, 7, -1))
    lock = _lock_redis_db(candidates)
    url = f"{base}/{lock.db}"
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
    try:
        client.ping()
        client.flushdb()
    except redis.RedisError as exc:
        lock.release()
        require_service("redis", f"{url}: {exc}")
    finally:
        client.close()
    yield url
    lock.release()


class _RedisDbLock:
    """An exclusive, per-machine claim on one Redis DB number for this test session (flock on a file)."""

    def __init__(self, db: int, handle) -> None:
        self.db = db
        self.handle = handle

    def release(self) -> None:
        if not self.handle.closed:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def _lock_redis_db(candidates: list[int]) -> _RedisDbLock:
    lock_dir = Path(tempfile.gettempdir())
    for db in candidates:
        handle = (lock_dir / f"gpufinops-test-redis-db-{db}.lock").open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return _RedisDbLock(db, handle)
    require_service("redis", f"every test Redis DB {candidates} is held by another test session")


@pytest.fixture
def clean_redis(redis_url: str) -> Iterator[str]:
    """redis_url with its DB flushed before the test (no leftover queues or unacked messages)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    yield redis_url


@pytest.fixture
def celery_broker(clean_redis: str, settings) -> Iterator[str]:
    """Point the in-process Celery app at the test Redis (broker and result backend) with eager mode off.

    Yields the broker URL; restores the app's configuration afterwards.
    """
    from gpufinops.celery import app

    keys = ("broker_url", "result_backend", "task_always_eager")
    saved = {key: app.conf.get(key) for key in keys}
    _reset_celery_connections(app)
    app.conf.update(broker_url=clean_redis, result_backend=clean_redis, task_always_eager=False)
    settings.CELERY_BROKER_URL = clean_redis
    settings.CELERY_RESULT_BACKEND = clean_redis
    settings.CELERY_TASK_ALWAYS_EAGER = False
    try:
        yield clean_redis
    finally:
        _reset_celery_connections(app)
        app.conf.update(saved)


def _reset_celery_connections(app) -> None:
    """Forget every cached connection, producer pool and result backend so a new broker URL takes effect.

    kombu keeps connection and producer pools in process-wide registries keyed by URL: closing a pool without
    clearing the registry would hand the next test a closed pool ("Acquire on closed pool").
    """
    from kombu import pools

    pools.reset()
    app._pool = None
    if "amqp" in app.__dict__:
        app.amqp._producer_pool = None
    app._backend_cache = None
    app._local.__dict__.pop("backend", None)
    # The producer pool keeps a reference to the (now closed) connection pool: drop it too.
    app.amqp._producer_pool = None


@pytest.fixture
def celery_worker_factory(celery_broker: str, transactional_db, test_database_url: str,
                          tmp_path: Path) -> Iterator[Callable[..., CeleryWorker]]:
    """Start real `celery -A gpufinops worker` processes on the test broker and test database.

    `start(**kwargs)` accepts CeleryWorker's keyword arguments (concurrency, pool, queues, extra_env, ...).
    Every worker is stopped at teardown. Data must be committed to be visible: this uses transactional_db.
    """
    workers: list[CeleryWorker] = []

    def start(**kwargs) -> CeleryWorker:
        kwargs.setdefault("log_path", tmp_path / f"celery-worker-{len(workers)}.log")
        worker = CeleryWorker(broker_url=celery_broker, database_url=test_database_url, **kwargs)
        workers.append(worker)
        return worker.start()

    yield start
    for worker in workers:
        worker.stop()


@pytest.fixture
def celery_worker_proc(celery_worker_factory) -> CeleryWorker:
    """One real prefork worker (-c 1) consuming from the test Redis and writing to the test database."""
    return celery_worker_factory()


# ---- Prometheus ----


@pytest.fixture
def prometheus_factory() -> Iterator[Callable[..., PrometheusServer]]:
    """`start(openmetrics_path, *, retention="3650d") -> PrometheusServer`; all are stopped and removed after."""
    prometheus = require_binary("prometheus")
    promtool = require_binary("promtool")
    servers: list[PrometheusServer] = []

    def start(openmetrics_path: Path | None, **kwargs) -> PrometheusServer:
        kwargs.setdefault("prometheus", prometheus)
        kwargs.setdefault("promtool", promtool)
        server = start_prometheus(openmetrics_path, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


# ---- SMTP ----


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    """A real aiosmtpd server on 127.0.0.1:<free port>; `.messages` lists what it received."""
    try:
        server = start_smtp_server()
    except ImportError as exc:
        require_service("aiosmtpd", f"not installed ({exc}); pip install -e '.[dev]'")
    yield server
    server.stop()


@pytest.fixture
def smtp_settings(smtp_server: SmtpServer, settings) -> SmtpServer:
    """Django's SMTP email backend pointed at smtp_server."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = smtp_server.host
    settings.EMAIL_PORT = smtp_server.port
    settings.EMAIL_HOST_USER = ""
    settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_USE_SSL = False
    return smtp_server


# ---- The simulator's Kubernetes API (capacity and queue tests) ----


@pytest.fixture(scope="session")
def kube_world():
    from tests.harness.kube_world import start_kube_world

    yield from start_kube_world()


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Each test starts with an empty cache (cached usage answers and throttle counters are per process)."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture(autouse=True)
def _fast_passwords(settings) -> None:
    """Hash passwords with a fast hasher in tests (PBKDF2's deliberate slowness adds up over the suite). The default
    hashers stay behind it: people made before this fixture ran (a package-scoped seed) still sign in."""
    from django.conf import global_settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *global_settings.PASSWORD_HASHERS]


# ---- Headless Chromium (UI tests) ----


@pytest.fixture
def browser():
    """A headless Chromium page driven over DevTools; skips locally / fails in CI when chromium is missing."""
    from tests.harness.browser import Browser, chromium_path

    binary = chromium_path()
    if binary is None:
        require_service("chromium", "no chromium binary on PATH (Debian: apt-get install -y chromium)")
    b = Browser.start(binary)
    yield b
    b.close()


# ---- Markers ----

# Fixtures that start or need a real service (a database server, Redis, a Celery worker, Prometheus, an SMTP
# server, a browser, a simulated cluster over HTTP): a test using any of them is marked `services`, so
# `make test-fast` (`pytest -m "not services and not slow"`) runs the rest.
SERVICE_FIXTURES = frozenset({
    "postgres_db", "test_database_url", "redis_url", "clean_redis", "celery_broker", "celery_worker_factory",
    "celery_worker_proc", "prometheus_factory", "smtp_server", "smtp_settings", "browser", "live_server",
    "kube_world", "sim_world", "sim_world_exported", "sim_world_recorded", "week_world",
})


# Fixtures whose tests take tens of seconds to minutes (a simulated history in a real Prometheus, real workers).
LONG_FIXTURES = frozenset({
    "sim_world", "sim_world_exported", "sim_world_recorded", "sim_world_no_node_name", "week_world",
    "sim_mixed", "sim_mixed_noattr", "shared_mixed_collection",
    "prometheus_factory",
    "celery_worker_factory", "celery_worker_proc", "demo_site", "browser",
})
# Package- or session-scoped worlds several modules share: their tests form one pytest-xdist group (one worker), so
# the world is built once, not once per worker that draws one of the modules. Every other world of
# tests/harness/shared_rows.py gets such a group too, `world-<fixture>` (below).
SHARED_WORLD_GROUPS = {"demo_site": "dashboard-demo", "shared_mixed_collection": "mixed-collection",
                       "shared_priced_day": "priced-demo-day"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (`--dist loadgroup`)
def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SERVICE_FIXTURES & fixtures:
            item.add_marker(pytest.mark.services)
        group = next((g for f, g in SHARED_WORLD_GROUPS.items() if f in fixtures), None)
        world = _world_of(item)
        if group is None and world:
            # A shared world's users, whatever their module, on one worker one after another: the world is built
            # once per run, not once per module that asks for it (the API's ledger: nine modules).
            group = f"world-{world}"
        item.add_marker(pytest.mark.xdist_group(group or str(item.path.relative_to(config.rootpath))))
    items[:] = _world_users_together(items)


class _GroupOrder:
    """The order in which pytest-xdist hands the groups out (`--dist loadgroup`: in collection order), set last:
    after pytest-django's sort into db, transactional and other tests (a tryfirst hook, like the one above)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items) -> None:
        items[:] = _longest_groups_first(_long_modules_first(items), group_seconds.previous_seconds(config))


def _longest_groups_first(items: list[pytest.Item], seconds: dict[str, float]) -> list[pytest.Item]:
    """The xdist groups by the seconds they took in the last run, longest first (tests/harness/group_seconds.py); a
    group without a figure keeps its place from `_long_modules_first`: before every group with one when it is long,
    after them otherwise. Each group's tests keep their order."""
    if not seconds:
        return items
    long_paths = _long_paths(items)
    unknown_long = {_group(item) for item in items if item.path in long_paths and _group(item) not in seconds}

    def cost(item: pytest.Item) -> float:
        group = _group(item)
        return seconds.get(group, float("inf") if group in unknown_long else 0.0)

    return sorted(items, key=lambda item: -cost(item))


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker is not None and marker.args else ""


def _long_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """Modules with a `slow` test or a long fixture first, the rest after, each keeping its order: pytest-xdist hands
    modules to workers in this order (`--dist loadgroup`), so the longest start at once instead of ending the run
    alone on one worker while the others idle."""
    long_paths = _long_paths(items)
    return [item for item in items if item.path in long_paths] + [item for item in items if item.path not in long_paths]


def _long_paths(items: list[pytest.Item]) -> set[Path]:
    return {
        item.path for item in items
        if item.get_closest_marker("slow") is not None or LONG_FIXTURES & set(getattr(item, "fixturenames", ()))
    }


def _world_users_together(items: list[pytest.Item]) -> list[pytest.Item]:
    """Within each module, the tests of one shared world side by side (in the order the world first appears, each
    test's order otherwise kept), so a world is built once per module, not again after every test without it.
    (pytest-django's stable sort into db, transactional and other tests runs after this and keeps it.)"""
    out: list[pytest.Item] = []
    run: list[pytest.Item] = []
    for item in [*items, None]:
        if run and (item is None or item.path != run[0].path):
            first: dict[str, int] = {}
            for test in run:
                first.setdefault(_world_of(test), len(first))
            keep = run[0].get_closest_marker("keep_order") is not None
            out += run if keep else sorted(run, key=lambda test: first[_world_of(test)])
            run = []
        if item is not None:
            run.append(item)
    return out


def _world_of(item: pytest.Item) -> str:
    return min(WORLD_FIXTURES.intersection(getattr(item, "fixturenames", ())), default="")
