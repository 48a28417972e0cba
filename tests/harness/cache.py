"""Expensive test inputs cached on disk by content: a key is the SHA-256 of everything the input is made from, so a
changed input makes a new key and the stale entry is never read again.

The cache lives in `var/test-cache/` (`GPUFINOPS_VAR_DIR`); `GPUFINOPS_TEST_CACHE=0` turns it off (every input is
made afresh). Entries are written to a temporary name and renamed, so parallel test sessions (pytest-xdist
workers, helpers on one machine) never read half an entry. Delete the folder to empty it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sqlite3
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def enabled() -> bool:
    return os.environ.get("GPUFINOPS_TEST_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    from django.conf import settings

    path = Path(settings.VAR_DIR) / "test-cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def content_key(*parts: str, files: Iterable[Path] = ()) -> str:
    """SHA-256 of `parts` and of each file's path and bytes (in sorted order)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    for path in sorted(Path(f) for f in files):
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def copy_sqlite(source: Path, target: Path) -> None:
    """A consistent copy of an SQLite database (WAL included), through SQLite's online backup; `target` appears
    whole or not at all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    os.close(handle)
    try:
        src = sqlite3.connect(source)
        dst = sqlite3.connect(temporary)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")  # one file: the copy carries no -wal beside it
        finally:
            dst.close()
            src.close()
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


# ---- The migrated SQLite test database ----


def migrations_key() -> str:
    """What a migrated database is made from: Django's version and every installed app's migration files."""
    import django
    from django.apps import apps
    from django.conf import settings

    files = [f for app in apps.get_app_configs() for f in (Path(app.path) / "migrations").glob("*.py")]
    return content_key(django.get_version(), repr(list(settings.INSTALLED_APPS)), files=files)


def migrated_sqlite_entry() -> Path | None:
    """Where the migrated SQLite test database of these migrations is (or would be) cached; None when the cache is
    off or the tests do not run on SQLite."""
    from django.conf import settings

    if not enabled() or settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
        return None
    return cache_dir() / f"migrated-{migrations_key()[:32]}.sqlite3"


# ---- Pure results (oracle answers over a scenario) ----


def source_files(*folders: str) -> list[Path]:
    """Every Python file under the repository folders named (what a pure result is computed by)."""
    root = Path(__file__).resolve().parents[2]
    return [path for folder in folders for path in sorted((root / folder).rglob("*.py"))]


def pickled(name: str, build: Callable[[], T], *, parts: Iterable[str], files: Iterable[Path]) -> T:
    """`build()`, or the result a previous session pickled for the same `parts` and source `files` (a pure function
    of them: an oracle's answer over a scenario built from fixed arguments). Off with the cache: always built."""
    if not enabled():
        return build()
    entry = cache_dir() / f"{name}-{content_key(name, *parts, files=files)[:32]}.pickle"
    if entry.exists():
        with entry.open("rb") as handle:
            loaded: T = pickle.load(handle)
        return loaded
    value = build()
    handle_fd, temporary = tempfile.mkstemp(dir=entry.parent, prefix=entry.name, suffix=".tmp")
    try:
        with os.fdopen(handle_fd, "wb") as handle:
            pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, entry)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return value


# ---- The migrated PostgreSQL test database ----


class PostgresTemplate:
    """A migrated PostgreSQL database of these migrations, which a test database is cloned from (`CREATE DATABASE ...
    TEMPLATE`, a file copy on the server) instead of being migrated (about 10 CPU-seconds per pytest-xdist worker, and
    the server's work besides). The first session to find none migrates its test database as usual and stores a copy
    under `name` (`store_from`) while holding a per-machine lock, so the other workers wait and clone it.

    The name is keyed by the migrations and the month: migrating creates the ledger's partitions of the months around
    it (apps/usage/partitions.py). Templates stay on the server (about 12 MB each); drop them with `DROP DATABASE`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = None

    @property
    def locked(self) -> bool:
        return self._lock is not None

    def lock(self) -> None:
        import fcntl

        handle = (Path(tempfile.gettempdir()) / f"{self.name}.lock").open("a")
        fcntl.flock(handle, fcntl.LOCK_EX)
        self._lock = handle

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing the file drops the flock
            self._lock = None

    def exists(self) -> bool:
        from django.db import connection

        with connection._nodb_cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [self.name])
            return cursor.fetchone() is not None

    def clone_into(self, database: str) -> None:
        """`database` afresh as a copy of the template. A leftover of an earlier session is dropped first, as Django
        does; one a running session is connected to is not (its DROP fails: two sessions on one DATABASE_URL at once
        share their test database names)."""
        from django.db import connection

        quote = connection.ops.quote_name
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {quote(database)}")
            cursor.execute(f"CREATE DATABASE {quote(database)} TEMPLATE {quote(self.name)}")

    def store_from(self, database: str) -> None:
        """Copy the freshly migrated `database` as the template: under a temporary name, then renamed, so a session
        never clones half a template. Nothing is stored when the server refuses (the next session migrates)."""
        from django.db import DatabaseError, connection

        quote = connection.ops.quote_name
        temporary = f"{self.name}_tmp"
        connection.close()  # a database being copied must have no connection
        try:
            with connection._nodb_cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS {quote(temporary)}")
                cursor.execute(f"CREATE DATABASE {quote(temporary)} TEMPLATE {quote(database)}")
                cursor.execute(f"ALTER DATABASE {quote(temporary)} RENAME TO {quote(self.name)}")
        except DatabaseError:
            pass

    def drop_clone(self) -> None:
        """Drop a test database cloned from the template at the end of the session (pytest-django keeps a database
        it did not create)."""
        from django.db import connection

        connection.creation.destroy_test_db(verbosity=0, keepdb=False)


def postgres_template() -> PostgresTemplate | None:
    """The template of the migrated PostgreSQL test database of these migrations this month; None when the cache is
    off or the tests do not run on PostgreSQL."""
    from datetime import UTC, datetime

    from django.db import connection

    if not enabled() or connection.vendor != "postgresql":
        return None
    return PostgresTemplate(f"gpufinops_template_{content_key(migrations_key(), f'{datetime.now(UTC):%Y-%m}')[:24]}")
