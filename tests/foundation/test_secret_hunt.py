"""No webhook or Prometheus secret in any log line, error field, admin page, API answer or page, for any role,
after failures of every kind (issue 23).

The secrets sit where operators put them: a chat webhook's key in its path and query, a Prometheus behind a
path token and basic auth. Collections fail every way a Prometheus can (refused, 401 echoing the request, garbage,
timeout) and notifications every way a webhook can (refused address, refused connection, HTTP 500, redirect,
timeout, unresolvable name); then everything people and logs see is searched."""

from __future__ import annotations

import base64
import logging
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client

from apps.accounts.selectors import FINANCE_GROUP
from apps.findings.models import Notification
from apps.findings.notifications import send_notifications
from apps.ingest.services import collect_cluster
from apps.inventory.models import Cluster, Team
from apps.usage.models import Bucket
from tests.findings.listeners import Listener, channel, idle_finding

# Every piece that must never be seen; none is a substring of anything ordinary.
PROM_PATH_KEY = "PathKeyQ7Zr9"
PROM_PASSWORD = "PromPwX4kd2"
HOOK_KEY = "HookKeyM3vW8"
HOOK_QUERY = "QueryTokN5pT1"
HOOK_USER = "HookUserB6yL0"
# The Basic header a misbehaving server echoes back: the same secret, base64-encoded.
PROM_BASIC = base64.b64encode(f"promuser:{PROM_PASSWORD}".encode()).decode()
SECRETS = (PROM_PATH_KEY, PROM_PASSWORD, PROM_BASIC, HOOK_KEY, HOOK_QUERY, HOOK_USER)
END = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


class PromFault(BaseHTTPRequestHandler):
    """A Prometheus that fails: 401 echoing the request line (path and query), garbage, or too slow."""

    mode = "401"

    def do_GET(self):  # noqa: N802
        if self.mode == "slow":
            time.sleep(3)
        body = (f"unauthorized: {self.requestline} {self.headers.get('Authorization')}" if self.mode == "401"
                else "<html>not json</html>").encode()
        self.send_response(401 if self.mode == "401" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


def prom_server(mode: str) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (PromFault,), {"mode": mode}))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def log_lines():
    """Every log line of every logger at every level, formatted with its traceback, as an operator would read it."""
    stream = StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture
def kube(tmp_path):
    from devtools.simulator.k8s_api import start_server
    from devtools.simulator.scenarios import build_scenario

    server = start_server(build_scenario("tiny", seed=0, end=END, days=1), host="127.0.0.1", port=0)
    server.set_time(END)
    kubeconfig = tmp_path / "kubeconfig"
    server.write_kubeconfig(str(kubeconfig))
    yield kubeconfig
    server.stop()


def people() -> dict[str, User]:
    users = {
        "member": User.objects.create_user("member", password="pw-member-123456"),
        "finance": User.objects.create_user("finance", password="pw-finance-123456"),
        "staff": User.objects.create_user("staff", password="pw-staff-123456", is_staff=True, is_superuser=True),
    }
    users["finance"].groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    Team.objects.get_or_create(name="research")[0].members.add(users["member"])
    return users


def fail_collections(kubeconfig, settings) -> list[Cluster]:
    settings.GPUFINOPS_PROMETHEUS_TIMEOUT = 0.5
    servers = {mode: prom_server(mode) for mode in ("401", "garbage", "slow")}
    ports = {"refused": closed_port(), **{m: s.server_address[1] for m, s in servers.items()}}
    clusters = []
    try:
        for mode, port in ports.items():
            cluster = Cluster.objects.create(
                name=f"prom-{mode}", kubeconfig_path=str(kubeconfig),
                prometheus_url=f"http://promuser:{PROM_PASSWORD}@127.0.0.1:{port}/tenant/{PROM_PATH_KEY}/prometheus",
            )
            report = collect_cluster(cluster, [END - timedelta(hours=1)], now=END)
            assert report.failed, mode
            clusters.append(cluster)
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()
    return clusters


def fail_notifications(settings) -> None:
    settings.GPUFINOPS_WEBHOOK_TIMEOUT = 0.5
    settings.GPUFINOPS_WEBHOOK_ALLOWED_HOSTS = ["localhost"]
    listeners = [Listener(status=500), Listener(status=307, location=f"http://169.254.169.254/{HOOK_KEY}"),
                 Listener(delay=3)]
    hosts = [f"localhost:{closed_port()}", "127.0.0.1", "169.254.169.254", "hooks.invalid",
             *(f"localhost:{listener.port}" for listener in listeners)]
    try:
        idle_finding()
        for i, host in enumerate(hosts):
            channel(f"http://{HOOK_USER}:pw@{host}/services/{HOOK_KEY}/x?token={HOOK_QUERY}", name=f"hook{i}")
        send_notifications()
        out, err = StringIO(), StringIO()
        Notification.objects.update(next_attempt_at=None)
        with pytest.raises(Exception) as failed:  # the command fails and says why
            call_command("notify_findings", stdout=out, stderr=err)
        said = out.getvalue() + err.getvalue() + str(failed.value)
        assert "failed" in said
        assert not [s for s in SECRETS if s in said], said
    finally:
        for listener in listeners:
            listener.close()
    errors = list(Notification.objects.values_list("last_error", flat=True))
    assert len(errors) == len(hosts) and all(errors), errors
    for kind in ("refused", "ConnectionError", "HTTP 500", "redirect, not followed", "Timeout", "resolve"):
        assert any(kind in e for e in errors), (kind, errors)


def pages() -> list[str]:
    day = (END - timedelta(hours=1)).date().isoformat()
    pages = ["/", "/data-status/", "/findings/", "/fleet/", "/capacity/", "/teams/", "/healthz", "/metrics",
             f"/api/v1/data-status/?start={day}", "/api/v1/clusters/", "/api/v1/findings/", "/api/v1/schema/",
             *(f"/api/v1/clusters/prom-{m}/" for m in ("refused", "401", "garbage", "slow"))]
    for model in admin.site._registry:
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        pages.append(base)
        pages += [f"{base}{pk}/change/" for pk in model.objects.values_list("pk", flat=True)[:20]]
    return pages


@pytest.mark.services  # the simulator's Kubernetes API over HTTP, loopback Prometheus and webhook listeners
@pytest.mark.django_db
def test_no_secret_anywhere_after_failures_of_every_kind(kube, settings, log_lines):
    users = people()
    clusters = fail_collections(kube, settings)
    fail_notifications(settings)

    stored = [*Bucket.objects.values_list("last_error", flat=True),
              *Notification.objects.values_list("last_error", flat=True)]
    from apps.monitoring.models import CollectionRun
    stored += list(CollectionRun.objects.values_list("error", flat=True))
    assert any("Prometheus" in e for e in stored)
    stored_clusters = str(list(Cluster.objects.values("prometheus_url", "prometheus_auth_encrypted",
                                                      "prometheus_path_encrypted")))
    leaks = [(s, text) for text in [*stored, stored_clusters] for s in SECRETS if s in text]
    assert leaks == []
    # The collector still has them all.
    assert PROM_PATH_KEY in clusters[0].prometheus_endpoint and clusters[0].prometheus_auth.endswith(PROM_PASSWORD)

    for kind in (None, *users):
        client = Client()
        if kind:
            client.force_login(users[kind])
        for page in pages():
            response = client.get(page)
            assert response.status_code < 500, (kind, page)
            body = response.content.decode(errors="replace")
            assert [s for s in SECRETS if s in body] == [], (kind, page)

    lines = log_lines.getvalue().splitlines()
    assert len(lines) > 50 and any("HTTP Status Code 401" in line for line in lines)
    assert [(s, line) for line in lines for s in SECRETS if s in line] == []
