"""A real Prometheus on a free loopback port, loaded with history from an OpenMetrics text.

    server = start_prometheus(path_to_openmetrics)    # promtool backfill + prometheus + wait for /-/ready
    server.query("avg_over_time(x[1h])", at=ts)      # -> the API's "result" list
    server.stop(); server.start()                    # outage and recovery: same port, same data dir
    server.close()                                   # stop and delete the data dir

The OpenMetrics text must end with `# EOF`; timestamps are Unix seconds and may be weeks old (retention
defaults to 10 years so nothing backfilled is dropped).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path

from tests.harness.backfill import BackfillError, backfill, go_env
from tests.harness.services import free_port

CONFIG_YAML = """\
# gpufinops test harness: no scrape targets, the data comes from backfilled blocks.
global:
  scrape_interval: 1h
  evaluation_interval: 1h
scrape_configs: []
"""


class PrometheusError(RuntimeError):
    """Prometheus or promtool did not do what the harness asked."""


class PrometheusServer:
    """One Prometheus process over one data directory; restartable on the same port."""

    def __init__(self, data_dir: Path, *, port: int, retention: str = "3650d", prometheus: str = "prometheus",
                 promtool: str = "promtool") -> None:
        self.data_dir = data_dir
        self.port = port
        self.retention = retention
        self.prometheus = prometheus
        self.promtool = promtool
        self.config_path = data_dir.parent / "prometheus.yml"
        self.log_path = data_dir.parent / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.config_path.write_text(CONFIG_YAML)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def backfill(self, openmetrics_path: Path) -> None:
        """Turn an OpenMetrics file into TSDB blocks in the data dir (while stopped; the next start loads them).

        The blocks promtool makes of one file are cached by content (tests/harness/cache.py: the file's bytes and
        the promtool binary), so the same history is backfilled once and copied afterwards."""
        entry = _blocks_entry(openmetrics_path, self.promtool)
        if entry is not None and entry.is_dir():
            shutil.copytree(entry, self.data_dir, dirs_exist_ok=True)
            return
        self._promtool_backfill(openmetrics_path)
        if entry is not None:
            _store_blocks(self.data_dir, entry)

    def load_blocks(self, blocks: Path) -> None:
        """Put already made TSDB blocks in the data dir (while stopped): hard links where the file system allows
        (Prometheus never rewrites a block's files in place; it writes new ones and renames), copies otherwise."""
        try:
            shutil.copytree(blocks, self.data_dir, dirs_exist_ok=True, copy_function=os.link)
        except OSError:
            shutil.copytree(blocks, self.data_dir, dirs_exist_ok=True)

    def _promtool_backfill(self, openmetrics_path: Path) -> None:
        try:
            backfill(self.promtool, openmetrics_path, self.data_dir, timeout=300)
        except BackfillError as exc:
            raise PrometheusError(str(exc)) from None

    def start(self, timeout: float = 60.0) -> PrometheusServer:
        """Start Prometheus on self.port over self.data_dir and wait until /-/ready answers 200."""
        if self.running:
            return self
        log = self.log_path.open("ab")
        try:
            self.process = subprocess.Popen(
                [
                    self.prometheus,
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.data_dir}",
                    f"--storage.tsdb.retention.time={self.retention}",
                    # No compaction of the backfilled two-hour blocks into longer ones a minute after start (a
                    # CPU-second of rewriting per long-lived world, for the same answers): blocks stay as loaded.
                    "--storage.tsdb.max-block-duration=2h",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.enable-lifecycle",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=go_env(),
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise PrometheusError(f"prometheus exited with {self.process.returncode}:\n{self.log_tail()}")
            if self._get_status("/-/ready") == 200:
                return self
            time.sleep(0.2)
        self.stop()
        raise PrometheusError(f"prometheus not ready after {timeout}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the process (SIGTERM, then SIGKILL); the data dir and port stay for a later start()."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        self.process = None

    def close(self) -> None:
        """Stop and delete the data directory."""
        self.stop()
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)

    def query(self, promql: str, at: float | datetime | None = None, timeout: float = 10.0) -> list[dict]:
        """Instant query; returns data.result (a list of {"metric": ..., "value": [ts, "str"]})."""
        params = {"query": promql}
        if at is not None:
            params["time"] = str(at.timestamp() if isinstance(at, datetime) else at)
        body = self._get_json("/api/v1/query?" + urllib.parse.urlencode(params), timeout=timeout)
        return body["data"]["result"]

    def query_value(self, promql: str, at: float | datetime | None = None) -> float | None:
        """The single scalar of an instant query with one series, or None when it returns nothing."""
        result = self.query(promql, at)
        if not result:
            return None
        if len(result) != 1:
            raise PrometheusError(f"{promql!r} returned {len(result)} series, expected one")
        return float(result[0]["value"][1])

    def wait_for(self, promql: str, at: float | datetime | None = None, timeout: float = 30.0) -> list[dict]:
        """Poll an instant query until it returns data: backfilled blocks are only queryable once loaded."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(promql, at)
            if result or time.monotonic() > deadline:
                if not result:
                    raise PrometheusError(f"{promql!r} still empty after {timeout}s")
                return result
            time.sleep(0.5)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _get_status(self, path: str) -> int | None:
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as response:
                return response.status
        except (urllib.error.URLError, OSError):
            return None

    def _get_json(self, path: str, timeout: float) -> dict:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            raise PrometheusError(f"GET {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from exc
        if body.get("status") != "success":
            raise PrometheusError(f"GET {path}: {body}")
        return body


def _blocks_entry(openmetrics_path: Path, promtool: str) -> Path | None:
    """Where the blocks of this OpenMetrics file are cached; None when the cache is off."""
    from tests.harness import cache

    if not cache.enabled():
        return None
    key = cache.content_key("promtool", _promtool_version(promtool), files=[openmetrics_path])
    return cache.cache_dir() / f"prometheus-blocks-{key[:32]}"


def _store_blocks(data_dir: Path, entry: Path) -> None:
    """Copy freshly backfilled blocks into the cache under a temporary name, then rename (whole or not at all)."""
    temporary = Path(tempfile.mkdtemp(dir=entry.parent, prefix=entry.name + ".tmp"))
    try:
        shutil.copytree(data_dir, temporary, dirs_exist_ok=True)
        temporary.rename(entry)
    except OSError:
        pass  # another session stored the same blocks first (or the disk refused): the next run backfills again
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _promtool_version(promtool: str) -> str:
    binary = Path(shutil.which(promtool) or promtool)
    stat = binary.stat() if binary.exists() else None
    return f"{binary}:{stat.st_size}:{stat.st_mtime_ns}" if stat else str(binary)


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """One process at a time per lock file (pytest-xdist workers and side-by-side sessions on one machine)."""
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def history_blocks(recipe: Iterable[str], files: Iterable[Path], write_openmetrics: Callable[[Path], None], *,
                   promtool: str = "promtool") -> Path:
    """TSDB blocks of the history `write_openmetrics(path)` writes, made once per recipe and shared.

    An exported simulator history is hundreds of MB of OpenMetrics and a minute of promtool; several test modules
    and every pytest-xdist worker want the same one. The blocks are keyed by what the history is made from (the
    `recipe`: scenario, arguments, hours; the source `files` that generate it; promtool's binary) rather than by
    the exported bytes, so a cached history costs neither the export nor the hashing of it. The first process to
    ask builds it while the others wait on a lock, then every one loads the same blocks (`load_blocks`). With the
    cache off (GPUFINOPS_TEST_CACHE=0) the blocks are made afresh in a temporary folder each time.

    `write_openmetrics(path)` writes one OpenMetrics file at `path`, or a directory there of one file per two-hour
    window (`simulate export-openmetrics --window-seconds` tests.harness.backfill.WINDOW_SECONDS: cheaper, no split
    pass before promtool)."""
    from tests.harness import cache

    recipe = list(recipe)
    if not cache.enabled():
        return _make_blocks(Path(tempfile.mkdtemp(prefix="gpufinops-blocks-")) / "blocks", write_openmetrics, promtool)
    key = cache.content_key("history-blocks", _promtool_version(promtool), *recipe, files=files)
    entry = cache.cache_dir() / f"history-blocks-{key[:32]}"
    if entry.is_dir():
        return entry
    with _exclusive(entry.with_name(entry.name + ".lock")):
        if not entry.is_dir():
            workdir = Path(tempfile.mkdtemp(dir=entry.parent, prefix=entry.name + ".tmp"))
            try:
                _make_blocks(workdir / "blocks", write_openmetrics, promtool).rename(entry)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
    return entry


def _make_blocks(target: Path, write_openmetrics: Callable[[Path], None], promtool: str) -> Path:
    target.mkdir(parents=True)
    openmetrics = target.parent / "history.om"  # a file, or a directory of one file per window (backfill())
    try:
        write_openmetrics(openmetrics)
        try:
            backfill(promtool, openmetrics, target, timeout=600)
        except BackfillError as exc:
            raise PrometheusError(str(exc)) from None
    finally:
        if openmetrics.is_dir():
            shutil.rmtree(openmetrics, ignore_errors=True)
        else:
            openmetrics.unlink(missing_ok=True)
    return target


def start_prometheus(openmetrics_path: Path | None, *, retention: str = "3650d", port: int | None = None,
                     prometheus: str = "prometheus", promtool: str = "promtool",
                     blocks: Path | None = None) -> PrometheusServer:
    """Backfill `openmetrics_path` (if given) or load ready `blocks` (history_blocks) into a fresh data dir, start
    Prometheus, wait until ready."""
    workdir = Path(tempfile.mkdtemp(prefix="gpufinops-prometheus-"))
    data_dir = workdir / "data"
    data_dir.mkdir()
    server = PrometheusServer(data_dir, port=port or free_port(), retention=retention, prometheus=prometheus,
                              promtool=promtool)
    try:
        if openmetrics_path is not None:
            server.backfill(Path(openmetrics_path))
        if blocks is not None:
            server.load_blocks(blocks)
        server.start()
    except BaseException:
        server.close()
        raise
    return server
