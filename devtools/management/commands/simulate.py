"""python manage.py simulate serve | export-openmetrics  (the simulated GPU cluster).

`serve` runs the Kubernetes API (with dcgm-exporter /metrics) and a Prometheus query API over the scenario;
`export-openmetrics` writes its history for promtool (tests and benchmarks load it into a real Prometheus).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError


def _parse_time(value: str) -> datetime:
    try:
        v = value.strip()
        if v.endswith("Z"):
            v = v[:-1] + "+00:00"
        dt = datetime.fromisoformat(v)
    except ValueError as exc:
        raise CommandError(f"invalid ISO 8601 time: {value!r}") from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


RENAME_HELP = (
    "export a DCGM field under another name, as an exporter whose CSV names it so would (repeatable), e.g. "
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS=DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (the name before DCGM 3.1) or "
    "DCGM_FI_DEV_XID_ERRORS=DCGM_FI_DEV_XID_ERROR (DCGM 4.6)"
)

LARGE_NODES_HELP = "large scenario only: its number of 8-GPU nodes (default 1250 = 10,000 GPUs; 125 = 1,000 GPUs)"
DRA_FRACTION_HELP = "large scenario only: the fraction of its nodes on NVIDIA's DRA driver, e.g. 0.333 (default 0)"
WITH_DRA_HELP = ("demo scenario only: with (--with-dra) or without (--no-with-dra) its DRA node group and HAMi "
                 "node (default: devtools.simulator.scenarios.DEMO_WITH_DRA, on)")


RECORDING_HELP = ("the series of deploy/monitoring/gpufinops-recording.yaml too, as a Prometheus evaluating it at "
                  "every scrape stores them (devtools/simulator/exposition.py RECORDED)")


def _rename(value: str) -> tuple[str, str]:
    import argparse

    from devtools.simulator.exposition import DCGM_FAMILIES

    old, sep, new = value.partition("=")
    if not sep or old not in DCGM_FAMILIES or not new or not new.replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(f"expected FROM=TO with FROM one of the DCGM metrics, got {value!r}")
    return old, new


def _options(opts: dict) -> dict:
    """The scenario's own options, as ``build_scenario`` takes them."""
    return {"large_nodes": opts["large_nodes"], "dra_fraction": opts["dra_fraction"], "with_dra": opts["with_dra"]}


class Command(BaseCommand):
    help = (
        "Simulated GPU cluster: serve a Kubernetes API + dcgm /metrics and a Prometheus query API, "
        "or export OpenMetrics history."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        s = sub.add_parser("serve", help="serve the Kubernetes API subset, /metrics and Prometheus until Ctrl-C")
        s.add_argument("--scenario", default="demo")
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--at", help="simulated time (ISO 8601); default: follow the wall clock")
        s.add_argument("--end", help="scenario end (hour-aligned ISO 8601); default: --at (or now) ceiled to the hour")
        s.add_argument("--days", type=float, default=7)
        s.add_argument("--large-nodes", type=int, default=None, metavar="N", help=LARGE_NODES_HELP)
        s.add_argument("--dra-fraction", type=float, default=None, metavar="F", help=DRA_FRACTION_HELP)
        s.add_argument("--with-dra", action=argparse.BooleanOptionalAction, default=None, help=WITH_DRA_HELP)
        s.add_argument("--host", default="127.0.0.1")
        s.add_argument("--port", type=int, default=0)
        s.add_argument("--kubeconfig-out", default="var/sim-kubeconfig.yaml")
        s.add_argument("--prometheus-port", type=int, default=0)
        s.add_argument("--scrape-seconds", type=int, default=60, help="the simulated Prometheus' scrape interval")
        s.add_argument("--rename-metric", action="append", default=[], metavar="FROM=TO", type=_rename,
                       help=RENAME_HELP)
        s.add_argument("--recording-rules", action="store_true", help=RECORDING_HELP)
        e = sub.add_parser("export-openmetrics", help="write DCGM + kube-state-metrics history as OpenMetrics")
        e.add_argument("--scenario", default="demo")
        e.add_argument("--seed", type=int, default=0)
        e.add_argument("--since", required=True)
        e.add_argument("--until", required=True)
        e.add_argument("--step", type=int, default=30)
        e.add_argument("--end", help="scenario end (hour-aligned); default: --until ceiled to the hour")
        e.add_argument(
            "--days", type=float, default=None, help="scenario length; default 7 days or enough to cover --since"
        )
        e.add_argument("--large-nodes", type=int, default=None, metavar="N", help=LARGE_NODES_HELP)
        e.add_argument("--dra-fraction", type=float, default=None, metavar="F", help=DRA_FRACTION_HELP)
        e.add_argument("--with-dra", action=argparse.BooleanOptionalAction, default=None, help=WITH_DRA_HELP)
        e.add_argument("--hostname-label", choices=["Hostname", "hostname"], default="Hostname")
        e.add_argument(
            "--exported-labels",
            action="store_true",
            help="Prometheus Operator honorLabels=false shape (exported_pod, exported_namespace)",
        )
        e.add_argument("--metrics", help="comma-separated metric families to export (default: all)")
        e.add_argument("--no-ksm", action="store_true", help="DCGM series only")
        e.add_argument("--rename-metric", action="append", default=[], metavar="FROM=TO", type=_rename,
                       help=RENAME_HELP)
        e.add_argument("--recording-rules", action="store_true", help=RECORDING_HELP)
        e.add_argument("--out", required=True)
        e.add_argument(
            "--window-seconds", type=int, default=None, metavar="N",
            help="write one OpenMetrics file per N-second window since the epoch into --out, a directory "
            "(7200: promtool's block length, so promtool reads each file once per block instead of the whole "
            "history once per block)",
        )

    def handle(self, *args, **opts):
        from devtools.simulator.model import ceil_hour
        from devtools.simulator.scenarios import build_scenario

        if opts["action"] == "serve":
            from devtools.simulator.k8s_api import start_server
            from devtools.simulator.prometheus_api import start_prometheus

            at = _parse_time(opts["at"]) if opts.get("at") else None
            end = _parse_time(opts["end"]) if opts.get("end") else ceil_hour(at or datetime.now(UTC))
            try:
                sc = build_scenario(opts["scenario"], seed=opts["seed"], end=end, days=opts["days"],
                                    **_options(opts))
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            sc.recording_rules = opts["recording_rules"]
            if opts["scrape_seconds"] <= 0:
                raise CommandError("--scrape-seconds must be positive")
            srv = start_server(sc, host=opts["host"], port=opts["port"])
            prometheus = start_prometheus(sc, host=opts["host"], port=opts["prometheus_port"],
                                          step=opts["scrape_seconds"], renames=dict(opts["rename_metric"]))
            srv.set_time(at)
            path = srv.write_kubeconfig(opts["kubeconfig_out"])
            self.stdout.write(
                f"simulated cluster {sc.cluster_name} ({opts['scenario']}, seed {opts['seed']}) "
                f"covering {sc.start.isoformat()} .. {sc.end.isoformat()}"
            )
            self.stdout.write(f"url: {srv.url}")
            self.stdout.write(f"kubeconfig: {path}")
            self.stdout.write(f"dcgm metrics: {srv.url}/metrics")
            self.stdout.write(f"prometheus: {prometheus.url}")
            self.stdout.flush()
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            try:
                while not stop.wait(1.0):
                    pass
            except KeyboardInterrupt:
                pass
            finally:
                srv.stop()
                prometheus.stop()
            return

        from devtools.simulator.exposition import export_openmetrics, stderr_progress

        since = _parse_time(opts["since"])
        until = _parse_time(opts["until"])
        if until <= since:
            raise CommandError("--until must be after --since")
        if opts["step"] <= 0:
            raise CommandError("--step must be positive")
        if opts["window_seconds"] is not None and opts["window_seconds"] <= 0:
            raise CommandError("--window-seconds must be positive")
        end = _parse_time(opts["end"]) if opts.get("end") else ceil_hour(until)
        days = opts["days"]
        if days is None:
            days = max(7.0, (end - since).total_seconds() / 86400.0)
            days = float(int(days) + (0 if days == int(days) else 1))
        try:
            sc = build_scenario(opts["scenario"], seed=opts["seed"], end=end, days=days, **_options(opts))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        sc.recording_rules = opts["recording_rules"]
        if since < sc.start:
            raise CommandError(f"--since is before the scenario start {sc.start.isoformat()}")
        metrics = [m.strip() for m in opts["metrics"].split(",")] if opts.get("metrics") else None
        sys.stderr.write(
            f"exporting {sc.cluster_name} {since.isoformat()} .. {until.isoformat()} step {opts['step']}s\n"
        )
        stats = export_openmetrics(
            sc,
            since.timestamp(),
            until.timestamp(),
            opts["out"],
            step=opts["step"],
            hostname_label=opts["hostname_label"],
            exported=opts["exported_labels"],
            metrics=metrics,
            include_ksm=not opts["no_ksm"],
            progress=stderr_progress,
            renames=dict(opts["rename_metric"]),
            window_seconds=opts["window_seconds"],
        )
        self.stdout.write(
            f"wrote {opts['out']} ({len(stats['files'])} file(s)): {stats['series']:,} series, "
            f"{stats['samples']:,} samples, {stats['bytes']:,} bytes in {stats['seconds']:.1f}s"
        )
