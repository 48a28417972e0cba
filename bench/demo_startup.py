"""bench/demo_startup: how long `make run` takes from a new SQLite database to the first page, and to a final week.

    python bench/demo_startup.py [--cold] [--keep DIR] [-- <demo options, e.g. --first-hours 24>]

What `make run` does after its install, each step timed (wall clock; CPU seconds of the processes, children included,
since on a shared 2-core machine the wall clock says as much about the other processes):

1. `manage.py migrate_cached` on a new SQLite file in a temporary var/ (`GPUFINOPS_VAR_DIR`): the migrated schema
   comes from the user's cache when one was made for these migrations, else from the committed
   devtools/sqlite_schema.sql when it is current (`--cold`: a temporary, empty cache, as on a fresh clone);
2. `manage.py demo --serve` on a free port (the default period: the previous full ISO week and the current one,
   the newest hours first): as soon as it prints where to sign in, sign in as the demo user and GET `/` until it
   answers 200: the seconds to the first page;
3. then GET `/reports/` every 2 s until it lists a final weekly edition: the seconds until the final week is listed;
   then Ctrl-C (SIGINT) stops the demo and its server.

Prints both figures from the start of step 1, the demo's own lines, and the load average before and after. Nothing is
asserted beyond the pages answering: these are measurements (bench/README.md, "bench/demo_startup").
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# An edition's status on /reports/ (templates/reports/index.html).
EDITION = r'<span class="badge ok">(final)</span>|<strong>(restated)</strong>|<td>(provisional)</td>'


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tree_cpu(pid: int) -> float | None:
    """CPU seconds used so far by a running process and its descendants, the reaped ones included (Linux /proc;
    None elsewhere)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    try:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
            times[int(entry.name)] = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    except OSError:
        return None
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += times.get(p, 0.0)
        todo.extend(parents.get(p, ()))
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def step(name: str, argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    cpu, started = cpu_children(), time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall, used = time.monotonic() - started, cpu_children() - cpu
    if done.returncode:
        sys.exit(f"{name} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    print(f"{name:<28} {wall:7.1f} s wall {used:7.1f} s CPU", flush=True)
    return wall, used, done.stdout


def sign_in(url: str, password: str, deadline: float):  # type: ignore[no-untyped-def]
    """A signed-in session (the server may still be starting)."""
    import requests

    session = requests.Session()
    while True:
        try:
            login = session.get(f"{url}/accounts/login/", timeout=60)
            break
        except requests.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    token = session.cookies.get("csrftoken") or ""
    session.post(f"{url}/accounts/login/", data={"username": "demo", "password": password,
                                                  "csrfmiddlewaretoken": token},
                 headers={"Referer": login.url}, timeout=60)
    return session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold", action="store_true", help="an empty schema cache (a fresh clone)")
    parser.add_argument("--keep", help="use (and keep) this var/ folder instead of a temporary one")
    parser.add_argument("--first-page-only", action="store_true",
                        help="stop (Ctrl-C the demo) after the first page: the first figure alone, cheaply")
    parser.add_argument("--timeout", type=float, default=1800, help="give up after this many seconds (default 1800)")
    parser.add_argument("demo_args", nargs="*", help="options for manage.py demo (after --)")
    args = parser.parse_args()
    var = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gpufinops-demo-startup-"))
    shutil.rmtree(var, ignore_errors=True)
    var.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(GPUFINOPS_VAR_DIR=str(var), GPUFINOPS_DEVTOOLS="1", DEBUG="1")
    if args.cold:
        env["XDG_CACHE_HOME"] = str(var / "cache")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env["GPUFINOPS_BASE_URL"] = url + "/"
    python = sys.executable
    print(f"load average before: {load()} ({os.cpu_count()} cores); var: {var}", flush=True)
    started = time.monotonic()
    deadline = started + args.timeout
    total_cpu = cpu_children()
    _, migrate_cpu, migrated = step("migrate_cached" + (" (cold)" if args.cold else ""),
                          [python, "manage.py", "migrate_cached"], env)
    print("  " + (migrated.splitlines() or [""])[0], flush=True)
    demo_started = time.monotonic()
    demo = subprocess.Popen([python, "manage.py", "demo", "--serve", f"127.0.0.1:{port}", *args.demo_args], cwd=ROOT,
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(demo.stdout or ()), daemon=True)
    reader.start()
    try:
        password = None
        while password is None:
            if demo.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the demo ended or timed out before serving:\n{''.join(lines)[-3000:]}")
            found = re.search(r"as demo / (\S+)", "".join(lines))
            password = found.group(1) if found else None
            time.sleep(0.1)
        serving = time.monotonic()
        session = sign_in(url, password, deadline)
        page = session.get(f"{url}/", timeout=120)
        page.raise_for_status()
        if "/accounts/login/" in page.url:
            sys.exit("could not sign in as demo")
        first = time.monotonic()
        used = tree_cpu(demo.pid)
        print(f"{'demo until it serves':<28} {serving - demo_started:7.1f} s wall", flush=True)
        if used is not None:
            print(f"{'CPU to the first page':<28} {used + migrate_cpu:7.1f} s (migrate_cached, and the demo with its "
                  "workers, simulated servers and web server so far)", flush=True)
        print(f"{'first page':<28} {first - started:7.1f} s after the start (sign-in and / "
              f"{first - serving:.1f} s); load average {load()}", flush=True)
        if not args.first_page_only:
            while True:
                reports = session.get(f"{url}/reports/", timeout=120)
                reports.raise_for_status()
                if '<span class="badge ok">final</span>' in reports.text:  # an edition's status (templates/reports)
                    break
                if demo.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"the demo ended or timed out before a final week was listed:\n{''.join(lines)[-3000:]}")
                time.sleep(2)
            final = time.monotonic()
            print(f"{'final week listed':<28} {final - started:7.1f} s after the start; load average {load()}",
                  flush=True)
            while not any("the demo is complete" in line for line in lines):  # the bill and the restated edition
                if demo.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"the demo ended or timed out before it completed:\n{''.join(lines)[-3000:]}")
                time.sleep(0.5)
            print(f"{'demo complete':<28} {time.monotonic() - started:7.1f} s after the start", flush=True)
            listed = session.get(f"{url}/reports/", timeout=120).text
            editions = {e for row in re.findall(EDITION, listed) for e in row if e}
            print(f"/reports/ lists: {', '.join(sorted(editions)) or 'no edition'} editions")
    finally:
        if demo.poll() is None:
            demo.send_signal(signal.SIGINT)  # Ctrl-C: the demo stops its server
            try:
                demo.wait(timeout=60)
            except subprocess.TimeoutExpired:  # SIGINT ignored (started in the background): SIGTERM stops it too
                demo.terminate()
                demo.wait()
        reader.join(timeout=10)
    print(f"{'total CPU':<28} {cpu_children() - total_cpu:7.1f} s (migrate, demo, its workers, simulated servers "
          "and web server)")
    print(f"load average after: {load()}")
    for line in lines:
        if line.startswith(("report edition", "sim-", "collecting", "serving", "the newest", "the demo is")):
            print("  demo: " + line.rstrip())
    if not args.keep:
        shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
