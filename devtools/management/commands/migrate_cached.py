"""python manage.py migrate_cached: `migrate`, a new SQLite database starting from a cached copy of the schema.

`make run` migrates a new SQLite database under var/ on a fresh clone. Django renders the model state of every
migration on the way (most of a migrate's time, about 10 s on 2 cores), and the result depends only on the migration
files and Django's version: the first migrate of a schema saves a copy under `~/.cache/gpufinops/sqlite/`
(`XDG_CACHE_HOME`), keyed by the SHA-256 of those, and a later new database (another clone, a deleted var/) starts
as that copy. `migrate` then runs as always (with nothing left to apply it only checks). Any other database
(PostgreSQL, an SQLite file that already has tables) is migrated as usual; `GPUFINOPS_SQLITE_CACHE=0` turns the cache
off.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from pathlib import Path

import django
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connections


class Command(BaseCommand):
    help = "migrate; a new SQLite database starts from a cached copy of the migrated schema (devtools, make run)."
    requires_system_checks: list[str] = []  # migrate runs them; nothing may open the database before the copy

    def handle(self, *args, **opts):  # type: ignore[no-untyped-def]
        database = _new_sqlite_file()
        cached = cache_path() if database is not None and _enabled() else None
        if cached is not None and database is not None and cached.exists():
            connections["default"].close()
            copy_sqlite(cached, database)
            self.stdout.write(f"SQLite schema copied from {cached}")
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


def cache_path() -> Path:
    """Where the migrated schema of these migration files and this Django is kept."""
    digest = hashlib.sha256(f"django {django.__version__}\0".encode())
    for app in sorted(apps.get_app_configs(), key=lambda a: a.label):
        folder = Path(app.path) / "migrations"
        for path in sorted(folder.glob("*.py")) if folder.is_dir() else ():
            digest.update(f"{app.label}/{path.name}\0".encode() + path.read_bytes() + b"\0")
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpufinops" / "sqlite"
    return root / f"schema-{digest.hexdigest()[:32]}.sqlite3"


def copy_sqlite(source: Path, target: Path) -> None:
    """A consistent one-file copy through SQLite's online backup; `target` appears whole or not at all (two runs
    at once each write their own temporary file)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    os.close(handle)
    try:
        src, dst = sqlite3.connect(source), sqlite3.connect(temporary)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")  # one file: no -wal beside it
        finally:
            dst.close()
            src.close()
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
