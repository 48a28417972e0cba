"""A recording HTTP proxy in front of a Kubernetes API (the simulator's): what did the collectors ask for?

    recorder = start_recorder(upstream_url)      # recorder.url: point the official client (a kubeconfig) here
    ... run a collection ...
    recorder.calls        # [ApiCall(verb="list", group="", resource="pods", ...), ...] in request order
    recorder.permissions  # {("list", "", "pods"), ("list", "kueue.x-k8s.io", "clusterqueues"), ...}
    recorder.stop()

Each request is forwarded unchanged (method, path, query, headers, body) and its answer returned unchanged;
the request is classified the way the API server's RequestInfo resolver classifies it for RBAC
(k8s.io/apiserver/pkg/endpoints/request/requestinfo.go): `/api/v1/...` is the core group "",
`/apis/<group>/<version>/...` a named group; `namespaces/<ns>/` scopes a resource; a GET of a collection
is `list`, of a named object `get`, with `?watch=1|true` `watch`; POST `create`, PUT `update`, PATCH `patch`,
DELETE `delete` (`deletecollection` on a collection). A subresource is written `resource/subresource`, as
RBAC rules name it. Discovery (`/api`, `/apis`, `/apis/<group>[/<version>]`) and other paths are recorded as
non-resource URLs, which the default `system:discovery` binding already grants to every authenticated user.

The simulator's `/at/<unix seconds>` time-travel prefix is stripped before classifying.
"""

from __future__ import annotations

import http.client
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# Hop-by-hop headers are the proxy's own business (RFC 9110 7.6.1), never forwarded.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authenticate", "proxy-authorization"}
# The only subresources of a namespace (requestinfo.go namespaceSubresources): `/api/v1/namespaces/x/status`
# is the namespace's status, not a list of a resource called "status".
NAMESPACE_SUBRESOURCES = {"status", "finalize"}
TIME_PREFIX = re.compile(r"^/at/[0-9.]+(?=/)")


@dataclass(frozen=True)
class ApiCall:
    method: str
    path: str
    verb: str  # RBAC verb, or the lower-case HTTP method for non-resource URLs
    group: str | None  # "" for core; None for non-resource URLs
    resource: str  # "pods", "clusterqueues/status"; the path for non-resource URLs
    namespace: str = ""
    name: str = ""
    status: int = 0

    @property
    def is_resource(self) -> bool:
        return self.group is not None

    @property
    def permission(self) -> tuple[str, str, str]:
        return (self.verb, self.group or "", self.resource)


def classify(method: str, raw_path: str) -> ApiCall:
    """The RBAC attributes of one request (see the module docstring)."""
    split = urlsplit(raw_path)
    path = TIME_PREFIX.sub("", split.path)
    query = parse_qs(split.query)
    parts = [p for p in path.split("/") if p]
    method = method.upper()

    def non_resource() -> ApiCall:
        return ApiCall(method, path, method.lower(), None, path or "/")

    if len(parts) >= 2 and parts[0] == "api":
        group, rest = "", parts[2:]  # /api/v1/...
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]  # /apis/<group>/<version>/...
    else:
        return non_resource()
    if not rest:
        return non_resource()  # /api/v1, /apis/<group>/<version>: discovery
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]  # a resource inside the namespace
        else:
            rest = ["namespaces", *rest[1:]]  # the namespace object itself (or its subresource)
            namespace = ""
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    watching = query.get("watch", [""])[-1].lower() in ("1", "true")
    if method in ("GET", "HEAD"):
        verb = "watch" if watching else ("get" if name else "list")
    elif method == "POST":
        verb = "create"
    elif method == "PUT":
        verb = "update"
    elif method == "PATCH":
        verb = "patch"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = method.lower()
    return ApiCall(method, path, verb, group, resource, namespace, name)


class RecordingProxy:
    """A threaded HTTP proxy to `upstream` (http://host:port) recording every request it forwards."""

    def __init__(self, upstream: str, host: str = "127.0.0.1", port: int = 0) -> None:
        target = urlsplit(upstream)
        if target.scheme != "http":
            raise ValueError(f"only plain-HTTP upstreams are proxied (got {upstream})")
        self.upstream_host, self.upstream_port = target.hostname or "127.0.0.1", target.port or 80
        self.upstream_prefix = target.path.rstrip("/")
        self.calls: list[ApiCall] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="k8s-recorder", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> RecordingProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def clear(self) -> None:
        with self._lock:
            self.calls.clear()

    @property
    def resource_calls(self) -> list[ApiCall]:
        with self._lock:
            return [c for c in self.calls if c.is_resource]

    @property
    def permissions(self) -> set[tuple[str, str, str]]:
        """(verb, apiGroup, resource) of every resource request."""
        return {c.permission for c in self.resource_calls}

    def _record(self, call: ApiCall) -> None:
        with self._lock:
            self.calls.append(call)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                return

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"host"}}
                conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
                try:
                    conn.request(self.command, proxy.upstream_prefix + self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    payload = answer.read()
                    status, reason, answer_headers = answer.status, answer.reason, answer.getheaders()
                except OSError as exc:
                    status, reason, answer_headers = 502, "Bad Gateway", [("Content-Type", "text/plain")]
                    payload = f"k8s recorder: upstream unreachable: {exc}\n".encode()
                finally:
                    conn.close()
                call = classify(self.command, self.path)
                proxy._record(ApiCall(**{**call.__dict__, "status": status}))
                self.send_response(status, reason)
                for key, value in answer_headers:
                    if key.lower() not in HOP_BY_HOP | {"content-length", "server", "date"}:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward  # noqa: N815

        return Handler


def start_recorder(upstream: str, host: str = "127.0.0.1", port: int = 0) -> RecordingProxy:
    return RecordingProxy(upstream, host, port).start()


def simulator():  # type: ignore[no-untyped-def]
    """(start_server, build_scenario, start_prometheus or None) from wherever the simulator lives now
    (`devtools.simulator`, formerly `apps.simulator`)."""
    try:
        from devtools.simulator.k8s_api import start_server
        from devtools.simulator.scenarios import build_scenario
    except ImportError:
        from apps.simulator.k8s_api import start_server  # type: ignore[no-redef]
        from apps.simulator.scenario import build_scenario  # type: ignore[no-redef]
    try:
        from devtools.simulator.prometheus_api import start_prometheus
    except ImportError:
        start_prometheus = None  # type: ignore[assignment]
    return start_server, build_scenario, start_prometheus


@dataclass
class RecordedWorld:
    """The simulated cluster's Kubernetes API behind a recorder, its Prometheus, and a kubeconfig naming the
    recorder: `Cluster(kubeconfig_path=world.kubeconfig, prometheus_url=world.prometheus_url)` collects
    through the production path (`api_client_for`, `PrometheusSource`) and every API call is recorded."""

    scenario: object
    server: object
    recorder: RecordingProxy
    prometheus: object
    prometheus_url: str
    kubeconfig: str
    end: object  # the scenario's last hour boundary (aware datetime)


def start_recorded_world(tmp_dir, days: int = 1, scenario_name: str = "demo"):  # type: ignore[no-untyped-def]
    """A generator yielding a RecordedWorld of the scenario (``mixed`` serves `resource.k8s.io` too: its
    resourceslices, resourceclaims, resourceclaimtemplates and deviceclasses classify like any named group) and
    tearing it down after (wrap it in a fixture).

    The Prometheus is the simulator's own (devtools.simulator.prometheus_api) where it exists, else a real,
    empty Prometheus (tests.harness.prometheus; buckets are then written without DCGM data)."""
    import json
    from datetime import UTC, datetime
    from pathlib import Path

    start_server, build_scenario, start_sim_prometheus = simulator()
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    scenario = build_scenario(scenario_name, seed=0, end=end, days=days)
    server = start_server(scenario, host="127.0.0.1", port=0)
    server.set_time(None)  # follow the wall clock: collect_cluster reads "now"
    recorder = start_recorder(server.url)
    if start_sim_prometheus is not None:
        prometheus = start_sim_prometheus(scenario, step=60)
        stop_prometheus = prometheus.stop
    else:
        from tests.harness.prometheus import start_prometheus
        from tests.harness.services import require_binary

        require_binary("prometheus")
        prometheus = start_prometheus(None)
        stop_prometheus = prometheus.close
    kubeconfig = Path(tmp_dir) / "recorded.kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "recorded", "preferences": {},
        "clusters": [{"name": "recorded", "cluster": {"server": recorder.url}}],
        "users": [{"name": "recorded", "user": {"token": "sim-token"}}],
        "contexts": [{"name": "recorded", "context": {"cluster": "recorded", "user": "recorded"}}],
    }))
    try:
        yield RecordedWorld(scenario, server, recorder, prometheus, prometheus.url, str(kubeconfig), end)
    finally:
        recorder.stop()
        stop_prometheus()
        server.stop()
