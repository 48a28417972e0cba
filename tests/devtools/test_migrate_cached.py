"""`manage.py migrate_cached` (make run): a new SQLite database starts from the cached migrated schema."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _migrate(var: Path, cache: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "GPUFINOPS_SQLITE_CACHE")}
    env.update(GPUFINOPS_VAR_DIR=str(var), XDG_CACHE_HOME=str(cache), GPUFINOPS_DEVTOOLS="1")
    done = subprocess.run([sys.executable, "manage.py", "migrate_cached"], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout


def _schema(path: Path) -> tuple[list, list]:
    with sqlite3.connect(path) as db:
        tables = db.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index') ORDER BY name")
        applied = db.execute("SELECT app, name FROM django_migrations ORDER BY app, name")
        return tables.fetchall(), applied.fetchall()


@pytest.mark.slow
def test_a_second_new_database_is_the_cached_copy_of_the_first(tmp_path):
    cache = tmp_path / "cache"
    first = _migrate(tmp_path / "one", cache)
    assert "schema copied" not in first and "Applying usage." in first
    (saved,) = (cache / "gpufinops" / "sqlite").glob("schema-*.sqlite3")
    second = _migrate(tmp_path / "two", cache)
    assert f"SQLite schema copied from {saved}" in second and "No migrations to apply." in second
    one, two = _schema(tmp_path / "one" / "gpufinops.sqlite3"), _schema(tmp_path / "two" / "gpufinops.sqlite3")
    assert one == two and len(one[1]) > 30
    third = _migrate(tmp_path / "two", cache)  # an existing database: migrated as usual, never overwritten
    assert "schema copied" not in third
