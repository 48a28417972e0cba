"""bench/demo_startup: how long `make run` takes from a new SQLite database to the first page, step by step.

    python bench/demo_startup.py [--cold] [--keep DIR] [-- <demo options, e.g. --days 1>]

What `make run` does after its install, each step timed (wall clock and the CPU seconds of the step's processes,
children included, since on a shared 2-core machine the wall clock says as much about the other processes):

1. `manage.py migrate_cached` on a new SQLite file in a temporary var/ (`GPUFINOPS_VAR_DIR`): the migrated schema
   comes from the user's cache when one was made for these migrations (`--cold`: a temporary, empty cache, as on a
   machine that never ran it);
2. `manage.py demo` (the default period: the previous full ISO week and the current one);
3. `manage.py runserver` on a free port, then the first page: sign in as the demo user with the password the demo
   printed and GET `/` until it answers 200; then `/reports/`, which must list a final weekly edition.

Prints each step, the total to the first page, and the load average before and after. Nothing is asserted beyond
the pages answering: these are measurements (bench/README.md, "bench/demo_startup").
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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


def first_page(url: str, password: str, deadline: float) -> tuple[float, str]:
    """Sign in and GET / until it answers 200 (the server may still be starting); returns when and /reports/."""
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
    page = session.get(f"{url}/", timeout=120)
    page.raise_for_status()
    if "/accounts/login/" in page.url:
        sys.exit("could not sign in as demo")
    at = time.monotonic()
    reports = session.get(f"{url}/reports/", timeout=120)
    reports.raise_for_status()
    return at, reports.text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold", action="store_true", help="an empty schema cache (a machine that never migrated)")
    parser.add_argument("--keep", help="use (and keep) this var/ folder instead of a temporary one")
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
    total_cpu = cpu_children()
    step("migrate_cached" + (" (cold)" if args.cold else ""), [python, "manage.py", "migrate_cached"], env)
    _, _, out = step("demo " + " ".join(args.demo_args), [python, "manage.py", "demo", *args.demo_args], env)
    password = re.search(r"as demo / (\S+)", out)
    if password is None:
        sys.exit(f"the demo printed no password (a database with users already?):\n{out[-2000:]}")
    server_started = time.monotonic()
    server = subprocess.Popen([python, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"], cwd=ROOT,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        at, reports = first_page(url, password.group(1), time.monotonic() + 120)
    finally:
        server.terminate()
        server.wait()
    print(f"{'runserver + first page':<28} {at - server_started:7.1f} s wall", flush=True)
    print(f"{'total to the first page':<28} {at - started:7.1f} s wall "
          f"{cpu_children() - total_cpu:7.1f} s CPU (server included)")
    editions = sorted(set(re.findall(r"\b(final|provisional|restated)\b", reports)))
    print(f"/reports/ mentions: {', '.join(editions) or 'no edition'}")
    print(f"load average after: {load()}")
    for line in out.splitlines():
        if line.startswith(("report edition", "sim-", "collecting")):
            print("  demo: " + line)
    if not args.keep:
        shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
