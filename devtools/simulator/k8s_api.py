"""A read-only Kubernetes API subset (core/v1, apps/v1 ReplicaSets, batch/v1 Jobs, Kueue, and ``resource.k8s.io``
in the versions the scenario serves: none, as before DRA, unless it has DRA) and dcgm-exporter /metrics over HTTP.

    srv = start_server(scenario, host="127.0.0.1", port=0)
    srv.url; srv.set_time(at); srv.set_fault(None | "500" | "timeout"); srv.write_kubeconfig(path); srv.stop()

``set_time(None)`` makes the simulated clock follow the wall clock (state at t >= scenario end is
the state at end).  The default time is the scenario end. Any path may be prefixed with
``/at/<unix seconds>`` to read the state at that instant instead (a client whose server URL carries the
prefix sees a cluster frozen at that time, whatever the clock of other clients).
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import orjson

from . import dra, dra_objects, exposition, objects, serving
from .model import Scenario, _uuid, iso, to_ts

KUEUE = "kueue.x-k8s.io"
VIS = "visibility.kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
CORE_RESOURCES = [
    {
        "name": "namespaces",
        "singularName": "namespace",
        "namespaced": False,
        "kind": "Namespace",
        "verbs": ["get", "list"],
        "shortNames": ["ns"],
    },
    {
        "name": "nodes",
        "singularName": "node",
        "namespaced": False,
        "kind": "Node",
        "verbs": ["get", "list"],
        "shortNames": ["no"],
    },
    {
        "name": "pods",
        "singularName": "pod",
        "namespaced": True,
        "kind": "Pod",
        "verbs": ["get", "list"],
        "shortNames": ["po"],
        "categories": ["all"],
    },
]
KUEUE_RESOURCES = [
    {
        "name": "clusterqueues",
        "singularName": "clusterqueue",
        "namespaced": False,
        "kind": "ClusterQueue",
        "verbs": ["get", "list"],
        "shortNames": ["cq"],
    },
    {
        "name": "localqueues",
        "singularName": "localqueue",
        "namespaced": True,
        "kind": "LocalQueue",
        "verbs": ["get", "list"],
        "shortNames": ["queue", "queues", "lq"],
    },
    {
        "name": "resourceflavors",
        "singularName": "resourceflavor",
        "namespaced": False,
        "kind": "ResourceFlavor",
        "verbs": ["get", "list"],
        "shortNames": ["flavor", "flavors", "rf"],
    },
    {
        "name": "workloads",
        "singularName": "workload",
        "namespaced": True,
        "kind": "Workload",
        "verbs": ["get", "list"],
        "shortNames": ["wl"],
    },
]
# Built-in groups beside core: the owners the collector lists (read-only), group -> (version, resources).
BUILTIN_GROUPS = {
    "apps": ("v1", [{"name": "replicasets", "singularName": "replicaset", "namespaced": True, "kind": "ReplicaSet",
                     "verbs": ["get", "list"], "shortNames": ["rs"], "categories": ["all"]},
                    {"name": "statefulsets", "singularName": "statefulset", "namespaced": True,
                     "kind": "StatefulSet", "verbs": ["get", "list"], "shortNames": ["sts"], "categories": ["all"]}]),
    "batch": ("v1", [{"name": "jobs", "singularName": "job", "namespaced": True, "kind": "Job",
                      "verbs": ["get", "list"], "categories": ["all"]}]),
}
DRA_RESOURCES = [
    {"name": plural, "singularName": plural[:-1], "namespaced": plural in dra_objects.NAMESPACED,
     "kind": dra_objects.KIND_OF[plural], "verbs": ["get", "list"]}
    for plural in dra_objects.KINDS
]
KIND_OF = {
    **dra_objects.KIND_OF,
    "nodes": "Node",
    "pods": "Pod",
    "namespaces": "Namespace",
    "replicasets": "ReplicaSet",
    "statefulsets": "StatefulSet",
    "jobs": "Job",
    "clusterqueues": "ClusterQueue",
    "localqueues": "LocalQueue",
    "resourceflavors": "ResourceFlavor",
    "workloads": "Workload",
}
NAMESPACED = {"pods", "replicasets", "statefulsets", "jobs", "localqueues", "workloads", *dra_objects.NAMESPACED}


class BadRequest(Exception):
    pass


# ------------------------------------------------------------------------------ selectors
def _split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return [x.strip() for x in out if x.strip()]


def parse_label_selector(sel: str):
    reqs = []
    for term in _split_top(sel or ""):
        low = term
        if " notin " in low or " in " in low:
            neg = " notin " in low
            k, rest = low.split(" notin " if neg else " in ", 1)
            rest = rest.strip()
            if not (rest.startswith("(") and rest.endswith(")")):
                raise BadRequest(f"unable to parse requirement: {term}")
            vals = {v.strip() for v in rest[1:-1].split(",") if v.strip()}
            reqs.append(("notin" if neg else "in", k.strip(), vals))
        elif "!=" in term:
            k, v = term.split("!=", 1)
            reqs.append(("!=", k.strip(), v.strip()))
        elif "==" in term:
            k, v = term.split("==", 1)
            reqs.append(("=", k.strip(), v.strip()))
        elif "=" in term:
            k, v = term.split("=", 1)
            reqs.append(("=", k.strip(), v.strip()))
        elif term.startswith("!"):
            reqs.append(("!exists", term[1:].strip(), None))
        else:
            if " " in term:
                raise BadRequest(f"unable to parse requirement: {term}")
            reqs.append(("exists", term, None))
    return reqs


def match_labels(reqs, labels: dict) -> bool:
    labels = labels or {}
    for op, k, v in reqs:
        has = k in labels
        if op == "=" and labels.get(k) != v:
            return False
        if op == "!=" and has and labels[k] == v:
            return False
        if op == "in" and (not has or labels[k] not in v):
            return False
        if op == "notin" and has and labels[k] in v:
            return False
        if op == "exists" and not has:
            return False
        if op == "!exists" and has:
            return False
    return True


FIELD_PATHS = {
    "spec.nodeName": lambda o: o.get("spec", {}).get("nodeName", ""),
    "status.phase": lambda o: o.get("status", {}).get("phase", ""),
    "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
    "metadata.name": lambda o: o["metadata"]["name"],
    "spec.unschedulable": lambda o: str(bool(o.get("spec", {}).get("unschedulable", False))).lower(),
    "spec.schedulerName": lambda o: o.get("spec", {}).get("schedulerName", ""),
    "status.podIP": lambda o: o.get("status", {}).get("podIP", ""),
}


def parse_field_selector(sel: str):
    reqs = []
    for term in _split_top(sel or ""):
        if "!=" in term:
            k, v = term.split("!=", 1)
            op = "!="
        elif "==" in term:
            k, v = term.split("==", 1)
            op = "="
        elif "=" in term:
            k, v = term.split("=", 1)
            op = "="
        else:
            raise BadRequest(f"invalid selector: '{sel}'; can't understand '{term}'")
        k = k.strip()
        if k not in FIELD_PATHS:
            raise BadRequest(f'"{k}" is not a known field selector: only "metadata.name", "metadata.namespace"')
        reqs.append((op, k, v.strip()))
    return reqs


def match_fields(reqs, obj) -> bool:
    for op, k, v in reqs:
        val = FIELD_PATHS[k](obj)
        if (op == "=") != (val == v):
            return False
    return True


# ------------------------------------------------------------------------------ server
def _status(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    d = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        d["details"] = details
    return d


class SimServer(serving.Server):
    def __init__(self, scenario: Scenario, host: str, port: int):
        self.scenario = scenario
        self._time: float | None = scenario.end.timestamp()
        self._fault: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._cache: dict = {}
        self._pages: dict[tuple, bytes] = {}
        super().__init__(_make_handler(self), host, port, "sim-k8s-api")
        self.requests = 0

    # public API
    def set_time(self, at):
        self._time = None if at is None else to_ts(at)

    def now(self) -> float:
        if self._time is None:
            return datetime.now(UTC).timestamp()
        return self._time

    def set_fault(self, mode):
        if mode not in (None, "500", "timeout"):
            raise ValueError(mode)
        self._fault = mode

    def write_kubeconfig(self, path) -> Path:
        path = Path(path)
        name = self.scenario.cluster_name
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "preferences": {},
            "clusters": [{"name": name, "cluster": {"server": self.url}}],
            "users": [{"name": f"{name}-admin", "user": {"token": "sim-token"}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cfg, indent=2))  # JSON is valid YAML
        return path

    def stop(self):
        self._stop.set()
        super().stop()

    def objects(self, kind: str, t: float, version: str = "v1beta2") -> list[dict]:
        """The objects of ``kind`` at ``t``, cached: a paginated list reads the same snapshot page by page."""
        key = (kind, int(t), version)
        with self._lock:
            if key not in self._cache:
                if len(self._cache) > 64:
                    self._cache.clear()
                if kind in dra_objects.KINDS:
                    self._cache[key] = dra_objects.dra_objects(self.scenario, kind, t, version)
                else:
                    self._cache[key] = objects.k8s_objects(self.scenario, kind, t, version)
            return self._cache[key]

    def page(self, key: tuple, build) -> bytes:
        """A LIST answer encoded once per (resource, snapshot time, selectors, page): the collector re-reads the same
        snapshot every collection (a fixed `--at` clock), and re-sorting and re-encoding its 4,000 pods with the
        standard library took the simulator's share of the shared cores at every read, a cost a real API server
        does not put on the collector's machine (bench/README.md, 2026-12-02, last). orjson encodes a new one."""
        with self._lock:
            body = self._pages.get(key)
        if body is None:
            body = orjson.dumps(build(), option=orjson.OPT_NON_STR_KEYS)
            with self._lock:
                if len(self._pages) > 64:  # a wall clock makes a new snapshot per read: bounded (~1 MB a page)
                    self._pages.clear()
                self._pages[key] = body
        return body

    def version(self) -> str:
        return dra.kubernetes_minor(self.scenario)


SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def _encode_continue(t: float, offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"t": t, "o": offset}).encode()).decode()


def _decode_continue(tok: str):
    try:
        d = json.loads(base64.urlsafe_b64decode(tok.encode()))
        return float(d["t"]), int(d["o"])
    except Exception as exc:
        raise BadRequest("continue key is not valid") from exc


def _make_handler(srv: SimServer):
    class Handler(serving.Handler):
        server_version = f"sim-kube-apiserver/1.{srv.version()}"
        _send = serving.Handler.send

        def do_POST(self):
            if urlparse(self.path).path.rstrip("/") == SSAR_PATH:
                return self._access_review()
            self._send(405, _status(405, "MethodNotAllowed", "the simulated API server is read-only"))

        do_PUT = do_PATCH = do_DELETE = do_POST

        def _access_review(self):
            """SelfSubjectAccessReview: may the caller do this? Allowed unless the scenario denies the resource
            (``Scenario.rbac_denied``: (apiGroup, resource) pairs), as an RBAC role missing a rule would."""
            length = int(self.headers.get("Content-Length") or 0)
            try:
                review = json.loads(self.rfile.read(length) or b"{}")
                attrs = review["spec"]["resourceAttributes"]
            except (ValueError, KeyError, TypeError):
                return self._send(400, _status(400, "BadRequest", "not a SelfSubjectAccessReview"))
            denied = (attrs.get("group") or "", attrs.get("resource") or "") in srv.scenario.rbac_denied
            review["status"] = {"allowed": not denied,
                                **({"reason": "no RBAC rule grants it"} if denied else {"reason": "allowed"})}
            review.setdefault("apiVersion", "authorization.k8s.io/v1")
            review.setdefault("kind", "SelfSubjectAccessReview")
            return self._send(201, review)

        def do_GET(self):
            srv.requests += 1
            fault = srv._fault
            if fault == "timeout":
                srv._stop.wait(60)
                with contextlib.suppress(Exception):
                    self._send(504, _status(504, "Timeout", "simulated timeout"))
                return
            if fault == "500":
                self._send(500, _status(500, "InternalError", "simulated internal error"))
                return
            try:
                self._route()
            except BadRequest as e:
                self._send(400, _status(400, "BadRequest", str(e)))
            except BrokenPipeError:
                pass

        def _route(self):
            u = urlparse(self.path)
            q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
            parts = [p for p in u.path.split("/") if p]
            t = srv.now()
            if len(parts) >= 2 and parts[0] == "at":  # /at/<unix seconds>/...: the state at that instant
                try:
                    t = float(parts[1])
                except ValueError as exc:
                    raise BadRequest(f"invalid time {parts[1]!r} in /at/") from exc
                parts = parts[2:]
            if parts == ["metrics"]:  # ?hostname_label=hostname&exported=1&rename=FROM=TO,FROM=TO
                hl = "hostname" if q.get("hostname_label", "Hostname") == "hostname" else "Hostname"
                exp = q.get("exported", "0") in ("1", "true", "yes")
                renames = dict(pair.split("=", 1) for pair in q.get("rename", "").split(",") if "=" in pair)
                text = exposition.dcgm_text(srv.scenario, t, hl, exp, renames)
                return self._send(200, text, "text/plain; version=0.0.4; charset=utf-8")
            if parts == ["version"]:
                minor = srv.version()
                return self._send(
                    200,
                    {
                        "major": "1",
                        "minor": minor,
                        "gitVersion": f"v1.{minor}.4-sim",
                        "gitCommit": "0" * 40,
                        "gitTreeState": "clean",
                        "buildDate": "2026-01-01T00:00:00Z",
                        "goVersion": "go1.22.10",
                        "compiler": "gc",
                        "platform": "linux/amd64",
                    },
                )
            if parts in (["healthz"], ["readyz"], ["livez"]):
                return self._send(200, "ok", "text/plain")
            if parts == ["api"]:
                return self._send(
                    200,
                    {
                        "kind": "APIVersions",
                        "versions": ["v1"],
                        "serverAddressByClientCIDRs": [
                            {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{srv.host}:{srv.port}"}
                        ],
                    },
                )
            if parts == ["api", "v1"]:
                return self._send(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": CORE_RESOURCES})
            if parts == ["apis"]:
                groups = [self._group(g, (v,)) for g, (v, _r) in BUILTIN_GROUPS.items()]
                if KUEUE_VERSIONS:  # a cluster without Kueue lists neither of its groups
                    groups += [self._group(KUEUE, KUEUE_VERSIONS), self._group(VIS, ("v1beta2", "v1beta1"))]
                if srv.scenario.dra_versions:
                    groups.append(self._group(dra.GROUP, srv.scenario.dra_versions))
                return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
            if len(parts) >= 2 and parts[:2] == ["apis", dra.GROUP]:
                return self._dra(parts[2:], q, t, u.path)
            if len(parts) >= 2 and parts[0] == "apis" and parts[1] in BUILTIN_GROUPS:
                group = parts[1]
                version, resources = BUILTIN_GROUPS[group]
                if len(parts) == 2:
                    return self._send(200, {"kind": "APIGroup", "apiVersion": "v1", **self._group(group, (version,))})
                if parts[2] != version:
                    return self._not_found(u.path)
                if len(parts) == 3:
                    return self._send(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                            "groupVersion": f"{group}/{version}", "resources": resources})
                return self._resource(parts[3:], q, t, version, group=group)
            if parts == ["apis", KUEUE] and KUEUE_VERSIONS:
                return self._send(200, {"kind": "APIGroup", "apiVersion": "v1", **self._group(KUEUE, KUEUE_VERSIONS)})
            if len(parts) == 3 and parts[:2] == ["apis", KUEUE] and parts[2] in KUEUE_VERSIONS:
                return self._send(
                    200,
                    {
                        "kind": "APIResourceList",
                        "apiVersion": "v1",
                        "groupVersion": f"{KUEUE}/{parts[2]}",
                        "resources": KUEUE_RESOURCES,
                    },
                )
            # core
            if parts[:2] == ["api", "v1"]:
                rest = parts[2:]
                return self._resource(rest, q, t, "v1", group="")
            if len(parts) >= 3 and parts[:2] == ["apis", KUEUE] and parts[2] in KUEUE_VERSIONS:
                return self._resource(parts[3:], q, t, parts[2], group=KUEUE)
            if len(parts) >= 3 and parts[:2] == ["apis", VIS] and parts[2] in ("v1beta2", "v1beta1"):
                return self._visibility(parts[3:], q, t, parts[2])
            return self._not_found(u.path)

        def _dra(self, rest, q, t, path):
            """``resource.k8s.io``: the versions the scenario serves; any other answers 404, as the group
            does on a cluster without DRA."""
            versions = srv.scenario.dra_versions
            if not versions or (rest and rest[0] not in versions):
                return self._not_found(path)
            if not rest:
                return self._send(200, {"kind": "APIGroup", "apiVersion": "v1", **self._group(dra.GROUP, versions)})
            if len(rest) == 1:
                return self._send(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                        "groupVersion": f"{dra.GROUP}/{rest[0]}", "resources": DRA_RESOURCES})
            return self._resource(rest[1:], q, t, rest[0], group=dra.GROUP)

        def _group(self, name, versions):
            vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
            return {"name": name, "versions": vs, "preferredVersion": vs[0]}

        def _not_found(self, path, kind=None, name=None):
            if kind and name:
                return self._send(
                    404, _status(404, "NotFound", f'{kind} "{name}" not found', {"name": name, "kind": kind})
                )
            return self._send(
                404,
                _status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                    {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]},
                ),
            )

        def _resource(self, rest, q, t, version, group):
            namespace = None
            if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
                namespace = rest[1]
                rest = rest[2:]
            if not rest:
                return self._not_found(self.path)
            plural = rest[0]
            if group == "":
                allowed = {"nodes", "pods", "namespaces"}
            elif group == KUEUE:
                allowed = {"clusterqueues", "localqueues", "resourceflavors", "workloads"}
            elif group == dra.GROUP:
                allowed = set(dra_objects.KINDS)
            else:
                allowed = {r["name"] for r in BUILTIN_GROUPS[group][1]}
            if plural not in allowed or len(rest) > 2:
                return self._not_found(self.path)
            if namespace is not None and plural not in NAMESPACED:
                return self._not_found(self.path)
            name = rest[1] if len(rest) == 2 else None
            cont = q.get("continue") or None
            snap_t = t
            offset = 0
            if cont:
                snap_t, offset = _decode_continue(cont)
            items = srv.objects(plural, snap_t, version if group in (KUEUE, dra.GROUP) else "v1beta2")
            if namespace is not None:
                items = [o for o in items if o["metadata"].get("namespace") == namespace]
            if name is not None:
                for o in items:
                    if o["metadata"]["name"] == name:
                        return self._send(200, o)
                return self._not_found(self.path, f"{plural}.{group}" if group else plural, name)
            try:
                limit = int(q.get("limit") or 0)
            except ValueError as exc:
                raise BadRequest("limit must be an integer") from exc
            key = (group, version, plural, namespace, snap_t, offset, limit, q.get("labelSelector", ""),
                   q.get("fieldSelector", ""))
            return self._send(200, srv.page(key, lambda: self._list(items, q, group, version, plural, snap_t, offset,
                                                                    limit)))

        def _list(self, items, q, group, version, plural, snap_t, offset, limit) -> dict:
            """One page of a LIST answer: the items matching the selectors, by namespace and name, from `offset`."""
            lsel = parse_label_selector(q.get("labelSelector", ""))
            fsel = parse_field_selector(q.get("fieldSelector", ""))
            if lsel or fsel:
                items = [o for o in items if match_labels(lsel, o["metadata"].get("labels")) and match_fields(fsel, o)]
            items = sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
            meta = {"resourceVersion": str(int(snap_t))}
            page = items[offset:]
            if limit > 0 and len(page) > limit:
                page = page[:limit]
                meta["continue"] = _encode_continue(snap_t, offset + limit)
                meta["remainingItemCount"] = len(items) - offset - limit
            api_version = f"{group}/{version}" if group else "v1"
            if group == dra.GROUP:  # a real API server's LIST items carry no kind/apiVersion
                page = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in page]
            return {"kind": KIND_OF[plural] + "List", "apiVersion": api_version, "metadata": meta, "items": page}

        def _visibility(self, rest, q, t, version):
            sc = srv.scenario
            items = []
            if len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
                wls = [w for w in sc.workloads if w.cluster_queue == rest[1]]
            elif (
                len(rest) == 5
                and rest[0] == "namespaces"
                and rest[2] == "localqueues"
                and rest[4] == "pendingworkloads"
            ):
                wls = [w for w in sc.workloads if w.namespace == rest[1] and w.queue == rest[3]]
            else:
                return self._not_found(self.path)
            pend = [w for w in wls if w.visible(t) and not w.finished_at(t) and not w.admitted_at(t)]
            pend.sort(key=lambda w: (-w.priority, w.created))
            for i, w in enumerate(pend):
                items.append(
                    {
                        "metadata": {
                            "name": w.name,
                            "namespace": w.namespace,
                            "creationTimestamp": iso(w.created),
                            "ownerReferences": [
                                {
                                    "apiVersion": "batch/v1",
                                    "kind": w.owner[0],
                                    "name": w.owner[1],
                                    "uid": _uuid("owner", sc.name, w.namespace, w.owner[1]),
                                }
                            ],
                        },
                        "priority": w.priority,
                        "localQueueName": w.queue,
                        "positionInClusterQueue": i,
                        "positionInLocalQueue": i,
                    }
                )
            off = int(q.get("offset") or 0)
            lim = int(q.get("limit") or 1000)
            return self._send(
                200,
                {
                    "kind": "PendingWorkloadsSummary",
                    "apiVersion": f"{VIS}/{version}",
                    "metadata": {"creationTimestamp": None},
                    "items": items[off : off + lim],
                },
            )

    return Handler


def start_server(scenario: Scenario, host: str = "127.0.0.1", port: int = 0) -> SimServer:
    return SimServer(scenario, host, port).start()
