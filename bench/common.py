"""Helpers shared by the benchmark scripts (run as `python bench/<name>.py`, so this is importable as `common`)."""

from __future__ import annotations

from urllib.parse import urlparse


def ensure_db(url: str) -> None:
    """Create the PostgreSQL database named in `url` if it does not exist yet."""
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
