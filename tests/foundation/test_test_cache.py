"""The on-disk cache of expensive test inputs (tests/harness/cache.py): keyed by content, copied whole."""

from __future__ import annotations

import sqlite3

from tests.harness import cache


def test_a_key_changes_with_any_input_and_with_nothing_else(tmp_path):
    a, b = tmp_path / "0001_initial.py", tmp_path / "0002_more.py"
    a.write_text("one")
    b.write_text("two")
    key = cache.content_key("django 5.2", files=[a, b])
    assert cache.content_key("django 5.2", files=[b, a]) == key  # the order files are found in does not matter
    assert cache.content_key("django 5.3", files=[a, b]) != key
    b.write_text("two, changed")
    assert cache.content_key("django 5.2", files=[a, b]) != key
    b.write_text("two")
    assert cache.content_key("django 5.2", files=[a, b]) == key
    assert cache.content_key("django 5.2", files=[a]) != key


def test_an_sqlite_copy_holds_what_the_wal_holds_in_one_file(tmp_path):
    source = tmp_path / "source.sqlite3"
    db = sqlite3.connect(source)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x INTEGER)")
    db.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    db.commit()  # still in source.sqlite3-wal: the connection is open and no checkpoint ran
    target = tmp_path / "cache" / "copy.sqlite3"
    cache.copy_sqlite(source, target)
    db.close()
    copy = sqlite3.connect(target)
    assert copy.execute("SELECT count(*), sum(x) FROM t").fetchone() == (100, 4950)
    assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    copy.close()
    assert sorted(p.name for p in target.parent.iterdir()) == ["copy.sqlite3"]  # no temporary left behind


def test_the_cache_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("GPUFINOPS_TEST_CACHE", "0")
    assert not cache.enabled()
    assert cache.migrated_sqlite_entry() is None
    monkeypatch.setenv("GPUFINOPS_TEST_CACHE", "1")
    assert cache.enabled()


def test_a_pure_result_is_built_once_per_content(tmp_path, settings, monkeypatch):
    monkeypatch.setenv("GPUFINOPS_TEST_CACHE", "1")
    settings.VAR_DIR = tmp_path / "var"
    source = tmp_path / "model.py"
    source.write_text("v1")
    builds: list[int] = []

    def build() -> dict:
        builds.append(1)
        return {"answer": len(builds)}

    assert cache.pickled("oracle", build, parts=["demo"], files=[source]) == {"answer": 1}
    assert cache.pickled("oracle", build, parts=["demo"], files=[source]) == {"answer": 1}  # read back, not built
    assert cache.pickled("oracle", build, parts=["tiny"], files=[source]) == {"answer": 2}  # other arguments
    source.write_text("v2")
    assert cache.pickled("oracle", build, parts=["demo"], files=[source]) == {"answer": 3}  # the code changed
    monkeypatch.setenv("GPUFINOPS_TEST_CACHE", "0")
    assert cache.pickled("oracle", build, parts=["demo"], files=[source]) == {"answer": 4}  # off: always built
    assert len(list((tmp_path / "var" / "test-cache").glob("oracle-*.pickle"))) == 3
