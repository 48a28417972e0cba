"""python manage.py migrate_cached [--write-schema]: `migrate`, a new SQLite database starting from the migrated schema.

`make run` migrates a new SQLite database under var/ on a fresh clone. Django renders the model state of every
migration on the way (most of a migrate's time, about 14 CPU-s), and the result depends only on the migration
files and Django's version, keyed by the SHA-256 of those (`schema_digest`). A new database (a fresh clone, a deleted
var/) starts as
- a copy of the schema this machine migrated last under that digest, saved under `~/.cache/gpufinops/sqlite/`
  (`XDG_CACHE_HOME`) by the first migrate of it; or else
- the committed schema, `devtools/sqlite_schema.sql` (SQL text with its digest on the first line), when its digest
  is theirs: a fresh clone never renders the migrations. `make schema` (`migrate_cached --write-schema`) writes it
  again after a migration changes; until then it is stale and ignored (slow, never wrong), and
  tests/devtools/test_migrate_cached.py fails naming that command.
`migrate` then runs as always (with nothing left to apply it only checks). Any other database (PostgreSQL, an SQLite
file that already has tables) is migrated as usual; `GPUFINOPS_SQLITE_CACHE=0` turns both starts off.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import django
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connections


class Command(BaseCommand):
    help = "migrate; a new SQLite database starts from a cached copy of the migrated schema (devtools, make run)."
    requires_system_checks: list[str] = []  # migrate runs them; nothing may open the database before the copy

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--write-schema", action="store_true",
                            help=f"migrate a temporary SQLite database and write its schema to {SCHEMA} (make schema)")

    def handle(self, *args, **opts):  # type: ignore[no-untyped-def]
        if opts["write_schema"]:
            write_schema(SCHEMA)
            self.stdout.write(f"{SCHEMA}: the migrated schema of {schema_digest()}")
            return
        database = _new_sqlite_file()
        cached = cache_path() if database is not None and _enabled() else None
        if cached is not None and database is not None and cached.exists():
            connections["default"].close()
            copy_sqlite(cached, database)
            self.stdout.write(f"SQLite schema copied from {cached}")
        elif cached is not None and database is not None and committed_schema_is_current():
            connections["default"].close()
            load_schema(SCHEMA, database)
            self.stdout.write(f"SQLite schema loaded from the committed {SCHEMA.name}")
        call_command("migrate", interactive=False, verbosity=opts["verbosity"], stdout=self.stdout)
        if cached is not None and database is not None and not cached.exists():
            connections["default"].close()
            copy_sqlite(database, cached)


def _enabled() -> bool:
    return os.environ.get("GPUFINOPS_SQLITE_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def _new_sqlite_file() -> Path | None:
    """The default database's file when it is SQLite on disk and has no tables yet, else None."""
    conn = connections["default"]
    name = str(conn.settings_dict["NAME"])
    if conn.vendor != "sqlite" or conn.is_in_memory_db():
        return None
    path = Path(name)
    if not path.exists() or path.stat().st_size == 0:
        return path
    with sqlite3.connect(path) as db:
        tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
    return None if tables else path


# The committed migrated schema: SQL text, its first line naming the digest of the migrations it is.
SCHEMA = Path(__file__).resolve().parents[2] / "sqlite_schema.sql"
HEADER = "-- gpufinops migrated SQLite schema "


def schema_digest() -> str:
    """The SHA-256 (32 hex digits) of Django's version and every app's migration files: the schema they make."""
    digest = hashlib.sha256(f"django {django.__version__}\0".encode())
    for app in sorted(apps.get_app_configs(), key=lambda a: a.label):
        folder = Path(app.path) / "migrations"
        for path in sorted(folder.glob("*.py")) if folder.is_dir() else ():
            digest.update(f"{app.label}/{path.name}\0".encode() + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def cache_path() -> Path:
    """Where this machine keeps the migrated schema of these migration files and this Django."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpufinops" / "sqlite"
    return root / f"schema-{schema_digest()}.sqlite3"


def committed_digest(path: Path = SCHEMA) -> str | None:
    """The digest the committed schema was written for (None: no such file)."""
    if not path.exists():
        return None
    with path.open(encoding="utf-8") as f:
        first = f.readline().strip()
    return first[len(HEADER):] if first.startswith(HEADER) else None


def committed_schema_is_current() -> bool:
    return committed_digest() == schema_digest()


def load_schema(path: Path, target: Path) -> None:
    """The committed SQL run into a new database file; `target` appears whole or not at all."""

    def fill(temporary: str) -> None:
        db = sqlite3.connect(temporary, isolation_level=None)
        try:
            db.executescript(path.read_text(encoding="utf-8"))
        finally:
            db.close()

    _write_whole(target, fill)


def write_schema(path: Path) -> None:
    """Migrate a new SQLite database in a temporary folder (a process of its own: this one's connection is the
    configured database) and write its dump, headed by the digest, to `path`."""
    import subprocess
    import sys

    with tempfile.TemporaryDirectory(prefix="gpufinops-schema-") as folder:
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        env.update(GPUFINOPS_VAR_DIR=folder, GPUFINOPS_SQLITE_CACHE="0")
        manage = Path(__file__).resolve().parents[3] / "manage.py"
        subprocess.run([sys.executable, str(manage), "migrate", "--noinput", "--verbosity", "0"], env=env, check=True)
        db = sqlite3.connect(Path(folder) / "gpufinops.sqlite3")
        try:
            # One date for every migration, so that writing the schema again changes only what the migrations do.
            db.execute("UPDATE django_migrations SET applied = '2000-01-01 00:00:00'")
            lines = list(db.iterdump())
        finally:
            db.close()
    path.write_text(f"{HEADER}{schema_digest()}\n-- Written by `make schema` (manage.py migrate_cached "
                    "--write-schema): do not edit.\n" + "\n".join(lines) + "\n", encoding="utf-8")


def copy_sqlite(source: Path, target: Path) -> None:
    """A consistent one-file copy through SQLite's online backup; `target` appears whole or not at all."""

    def fill(temporary: str) -> None:
        src, dst = sqlite3.connect(source), sqlite3.connect(temporary)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")  # one file: no -wal beside it
        finally:
            dst.close()
            src.close()

    _write_whole(target, fill)


def _write_whole(target: Path, fill: Callable[[str], None]) -> None:
    """`fill` writes a temporary file beside `target`, which then replaces it at once (two runs at once each write
    their own temporary file)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    os.close(handle)
    try:
        fill(temporary)
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
