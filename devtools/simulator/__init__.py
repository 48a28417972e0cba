"""A deterministic simulated GPU cluster for the demo, the tests and the benchmarks.

Modules, each importing only those above it:

* ``model``: constants, helpers, dataclasses and ``Scenario`` (activity and DCGM values at any instant);
* ``builders``: GPU units, Kueue jobs, and the interpreter of declarative scenarios;
* ``scenarios``: ``build_scenario(name, seed, end, days)`` for `demo` (data), `tiny` and `large`;
* ``objects``, ``exposition``: Kubernetes/Kueue objects, dcgm-exporter and kube-state-metrics series;
* ``promql``: a PromQL subset evaluator (standalone);
* ``serving``, ``k8s_api``, ``prometheus_api``: the Kubernetes API and the Prometheus query API over HTTP.
"""
