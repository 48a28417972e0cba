"""python manage.py screenshots [--out docs/screenshots] [--seed] [--width 1400]: the README's screenshots.

Uses the demo in the current database (runs `manage.py demo` first when there is none, or with --seed), signs
in as a team lead (a member of `research`) and as a finance analyst (group `finance`), serves the site on a
loopback port, drives Debian's headless `chromium` over the DevTools protocol (tests/harness/browser.py) and
writes one full-page PNG per page at 1400 px width.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

LEAD, FINANCE, STAFF, TEAM = "screenshot-lead", "screenshot-finance", "screenshot-staff", "research"
# The staff preflight page shows a degraded cluster: the demo with dcgm-exporter's stock counters list.
PREFLIGHT_SCENARIO = "demo-stock-counters"
# (file, who, path): every page, as the person it is for.
PAGES = [
    ("sign-in", None, "/accounts/login/"),
    ("lead-overview", LEAD, "/"),
    ("lead-workloads", LEAD, "/workloads/"),
    ("lead-workload", LEAD, "{top_workload}"),
    ("lead-queues", LEAD, "/queues/"),
    ("lead-teams", LEAD, "/teams/"),
    ("lead-findings", LEAD, "/findings/"),
    ("lead-savings", LEAD, "/savings/"),
    ("finance-overview", FINANCE, "/"),
    ("finance-fleet", FINANCE, "/fleet/"),
    ("finance-teams", FINANCE, "/teams/"),
    ("finance-workloads", FINANCE, "/workloads/"),
    ("finance-queues", FINANCE, "/queues/"),
    ("finance-capacity", FINANCE, "/capacity/"),
    ("finance-findings", FINANCE, "/findings/"),
    ("finance-savings", FINANCE, "/savings/"),
    ("finance-data-status", FINANCE, "/data-status/"),
    ("finance-reports", FINANCE, "/reports/"),
    ("glossary", FINANCE, "/glossary/"),
    ("staff-preflight", STAFF, f"/clusters/sim-{PREFLIGHT_SCENARIO}/preflight/"),
]


class Command(BaseCommand):
    help = "Write a full-page PNG of every dashboard page (team lead and finance views) with headless Chromium."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--out", default=str(settings.BASE_DIR / "docs" / "screenshots"))
        parser.add_argument("--seed", action="store_true", help="run `manage.py demo` first, even if it exists")
        parser.add_argument("--width", type=int, default=1400)
        parser.add_argument("--only", nargs="*", default=None, help="file names (without .png) to write")

    def handle(self, *args, **opts):  # type: ignore[no-untyped-def]
        from django.contrib.staticfiles.handlers import StaticFilesHandler
        from django.test.testcases import LiveServerThread

        from apps.inventory.models import Cluster
        from tests.harness.browser import Browser, chromium_path

        binary = chromium_path()
        if binary is None:
            raise CommandError("no chromium on PATH (Debian: apt-get install -y chromium)")
        if opts["seed"] or not Cluster.objects.filter(name="sim-demo").exists():
            call_command("demo", stdout=self.stdout)
        cookies = self._users()
        if not opts["only"] or "staff-preflight" in opts["only"]:
            self._preflight()
        out = Path(opts["out"])
        out.mkdir(parents=True, exist_ok=True)
        server = LiveServerThread("127.0.0.1", StaticFilesHandler, port=0)  # finds static files as runserver
        server.daemon = True
        server.start()
        server.is_ready.wait()
        if server.error:
            raise CommandError(f"could not serve the site: {server.error}")
        base = f"http://127.0.0.1:{server.port}"
        browser = Browser.start(binary, width=opts["width"], height=900)
        try:
            current = None
            for name, who, path in PAGES:
                if opts["only"] and name not in opts["only"]:
                    continue
                if who != current:
                    browser.send("Network.clearBrowserCookies")
                    if who:
                        browser.set_cookie(settings.SESSION_COOKIE_NAME, cookies[who], base)
                    current = who
                if "{top_workload}" in path:
                    path = self._top_workload(browser, base)
                browser.goto(base + path)
                self._settle(browser)
                target = out / f"{name}.png"
                self._full_page(browser, target, opts["width"])
                self.stdout.write(f"{target} ({path})")
        finally:
            browser.close()
            server.terminate()

    def _users(self) -> dict[str, str]:
        """The two people, created when missing (no password: they only sign in through a session here)."""
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group
        from django.test import Client

        from apps.accounts.selectors import FINANCE_GROUP
        from apps.accounts.services import add_team_member

        users = get_user_model()
        lead = users.objects.get_or_create(username=LEAD)[0]
        add_team_member(TEAM, lead.username, create=True)
        finance = users.objects.get_or_create(username=FINANCE)[0]
        finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
        cookies = {}
        staff = users.objects.get_or_create(username=STAFF, defaults={"is_staff": True})[0]
        for user in (lead, finance, staff):
            client = Client()
            client.force_login(user)
            cookies[user.username] = client.cookies[settings.SESSION_COOKIE_NAME].value
        return cookies

    def _preflight(self) -> None:
        """Preflight the simulated degraded cluster (its Kubernetes API and Prometheus served on loopback for
        the run), so the staff page has a result to show."""
        from datetime import UTC, datetime, timedelta

        from apps.ingest.preflight import run_preflight
        from apps.inventory.models import Cluster
        from devtools.simulator.k8s_api import start_server
        from devtools.simulator.model import floor_hour
        from devtools.simulator.prometheus_api import start_prometheus
        from devtools.simulator.scenarios import build_scenario

        end = floor_hour(datetime.now(UTC))
        scenario = build_scenario(PREFLIGHT_SCENARIO, end=end, days=1)
        kube, prom = start_server(scenario), start_prometheus(scenario, step=60)
        try:
            at = end - timedelta(minutes=1)
            kube.set_time(at.timestamp())
            kubeconfig = kube.write_kubeconfig(Path(settings.VAR_DIR) / "screenshot-preflight.kubeconfig")
            cluster = Cluster.objects.update_or_create(
                name=scenario.cluster_name, defaults={"kubeconfig_path": str(kubeconfig)})[0]
            cluster.set_prometheus_url(prom.url)
            cluster.save()
            run_preflight(cluster, at=at)
        finally:
            kube.stop()
            prom.stop()

    def _top_workload(self, browser, base: str) -> str:  # type: ignore[no-untyped-def]
        """The first workload of the lead's workloads page (the largest idle cost)."""
        browser.goto(base + "/workloads/")
        href = browser.eval("(document.querySelector('#workloads tbody th a') || {}).href || ''")
        if not href:
            raise CommandError("the team lead sees no workload: is the demo seeded?")
        return href.removeprefix(base)

    def _settle(self, browser) -> None:  # type: ignore[no-untyped-def]
        """Wait until every chart container has been drawn by Plotly."""
        deadline = time.monotonic() + 20
        expr = ("Array.from(document.querySelectorAll('.chart')).every(e => e.querySelector('.main-svg'))")
        while not browser.eval(expr) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)

    def _full_page(self, browser, path: Path, width: int) -> None:  # type: ignore[no-untyped-def]
        height = int(browser.eval("Math.ceil(document.documentElement.scrollHeight)"))
        browser.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                     mobile=False)
        try:
            time.sleep(0.3)  # responsive charts redraw at the new size
            data = browser.send("Page.captureScreenshot", format="png",
                                clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})["data"]
        finally:
            browser.send("Emulation.clearDeviceMetricsOverride")
        path.write_bytes(base64.b64decode(data))
