"""Real loopback HTTP listeners for the webhook safety tests: each records what reached it and answers as told
(a status, a Location for redirects, or a delay longer than the client waits)."""

from __future__ import annotations

import socket
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.utils import timezone

from apps.findings.constants import Kind
from apps.findings.models import Finding, TeamChannel
from apps.inventory.models import Cluster, Team


class Listener:
    def __init__(self, host: str = "127.0.0.1", status: int = 204, location: str = "", delay: float = 0.0) -> None:
        self.hits: list[str] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                listener.hits.append(self.path)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if delay:
                    time.sleep(delay)
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST  # noqa: N815

            def log_message(self, *args):
                pass

        server_class = type("Server", (ThreadingHTTPServer,), {
            "address_family": socket.AF_INET6 if ":" in host else socket.AF_INET, "daemon_threads": True})
        self.server = server_class((host, 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def idle_finding(team: str = "research", cluster_name: str = "hooks") -> Finding:
    """One idle allocation worth telling `team` about now."""
    cluster, _ = Cluster.objects.get_or_create(name=cluster_name)
    Team.objects.get_or_create(name=team)
    hour = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    return Finding.objects.create(
        cluster=cluster, kind=Kind.IDLE_ALLOCATION, subject=f"uid-{Finding.objects.count()}", team=team,
        namespace=team, pod="train-0", workload="Job/train", start=hour - timedelta(hours=5), last_hour=hour, hours=6,
        detail={"gpus": 8},
    )


def channel(url: str, team: str = "research", name: str = "chat") -> TeamChannel:
    row = TeamChannel(team=Team.objects.get_or_create(name=team)[0], name=name)
    row.url = url
    row.save()
    return row
