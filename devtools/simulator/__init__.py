"""A deterministic simulated GPU cluster for the demo, the tests and the benchmarks.

Modules, each importing only those above it:

* ``model``: constants, helpers, dataclasses and ``Scenario`` (activity and DCGM values at any instant);
* ``builders``: GPU units, Kueue jobs, and the interpreter of declarative scenarios; ``dra`` and ``hami``: GPUs
  handed out by DRA claims and by HAMi fractions (devices, claims, tenants, and their conventions);
* ``scenarios``: ``build_scenario(name, seed, end, days)`` for `demo` (data), `tiny`, `large` and `mixed`;
* ``objects``, ``dra_objects``, ``exposition``: Kubernetes/Kueue objects, ``resource.k8s.io`` objects,
  dcgm-exporter and kube-state-metrics series;
* ``promql``: a PromQL subset evaluator (standalone);
* ``serving``, ``k8s_api``, ``prometheus_api``: the Kubernetes API and the Prometheus query API over HTTP.
"""
