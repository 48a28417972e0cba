"""`manage.py migrate_cached` (make run): a new SQLite database starts from the cached or committed migrated schema."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _migrate(var: Path, cache: Path, *, starts: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "GPUFINOPS_SQLITE_CACHE")}
    env.update(GPUFINOPS_VAR_DIR=str(var), XDG_CACHE_HOME=str(cache), GPUFINOPS_DEVTOOLS="1")
    if not starts:
        env["GPUFINOPS_SQLITE_CACHE"] = "0"
    done = subprocess.run([sys.executable, "manage.py", "migrate_cached"], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout


def _schema(path: Path) -> tuple[list, list]:
    with sqlite3.connect(path) as db:
        tables = db.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index') ORDER BY name")
        applied = db.execute("SELECT app, name FROM django_migrations ORDER BY app, name")
        return tables.fetchall(), applied.fetchall()


@pytest.mark.slow
def test_a_new_database_starts_as_the_committed_schema_then_as_the_cached_copy(tmp_path):
    cache = tmp_path / "cache"
    plain = _migrate(tmp_path / "plain", cache, starts=False)  # GPUFINOPS_SQLITE_CACHE=0: the migrations, as ever
    assert "schema" not in plain and "Applying usage." in plain
    assert not (cache / "gpufinops").exists()
    first = _migrate(tmp_path / "one", cache)  # a fresh clone on a machine that never migrated
    assert "SQLite schema loaded from the committed sqlite_schema.sql" in first and "No migrations to apply." in first
    (saved,) = (cache / "gpufinops" / "sqlite").glob("schema-*.sqlite3")
    second = _migrate(tmp_path / "two", cache)
    assert f"SQLite schema copied from {saved}" in second and "No migrations to apply." in second
    plain_schema = _schema(tmp_path / "plain" / "gpufinops.sqlite3")
    assert plain_schema == _schema(tmp_path / "one" / "gpufinops.sqlite3") == _schema(tmp_path / "two" /
                                                                                       "gpufinops.sqlite3")
    assert len(plain_schema[1]) > 30
    third = _migrate(tmp_path / "two", cache)  # an existing database: migrated as usual, never overwritten
    assert "schema copied" not in third and "schema loaded" not in third


def test_the_committed_schema_is_the_current_migrations_one():
    """Fast and without services: fails as soon as a migration (or Django's version) changes until the schema a fresh
    clone's `make run` starts from is written again (a stale one is ignored: a slow first start, never a wrong one)."""
    from devtools.management.commands.migrate_cached import SCHEMA, committed_digest, schema_digest

    assert committed_digest() == schema_digest(), (
        f"{SCHEMA.name} was written for other migrations: run `make schema` and commit {SCHEMA.relative_to(ROOT)}")


def test_a_stale_or_missing_committed_schema_is_never_loaded(tmp_path):
    from devtools.management.commands.migrate_cached import HEADER, committed_digest

    stale = tmp_path / "stale.sql"
    stale.write_text(f"{HEADER}0123456789abcdef0123456789abcdef\nCREATE TABLE t (x);\n")
    assert committed_digest(stale) == "0123456789abcdef0123456789abcdef"
    assert committed_digest(tmp_path / "none.sql") is None
    (tmp_path / "headless.sql").write_text("CREATE TABLE t (x);\n")
    assert committed_digest(tmp_path / "headless.sql") is None
