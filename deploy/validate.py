#!/usr/bin/env python3
"""Validate rendered manifests offline against the Kubernetes JSON schemas bundled with kubernetes-validate.

    python deploy/validate.py build/deploy/*.yaml                 # strict, Kubernetes 1.28 and 1.37
    python deploy/validate.py --kubernetes-version 1.31.0 FILE...

Strict mode: an unknown field is an error (a typo such as `readinessprobe` would otherwise pass). Objects of
the custom resources in CRD_KINDS (Prometheus Operator) have no bundled schema and are skipped by name; any
other kind without a schema is an error. Exit 0 when every object is valid, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import kubernetes_validate
import yaml

# Custom resources we ship whose CRDs are not part of Kubernetes (no bundled schema): skipped, by this list only.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}
DEFAULT_VERSIONS = ("1.28.0", "1.37.0")  # the oldest Kubernetes we support and the newest schema bundled


def validate_file(path: Path, versions: tuple[str, ...]) -> tuple[int, int, list[str]]:
    """(objects validated, objects skipped, errors) of one multi-document YAML file."""
    checked = skipped = 0
    errors: list[str] = []
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if not doc:
            continue
        ident = f"{path.name}: {doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"
        if (doc.get("apiVersion"), doc.get("kind")) in CRD_KINDS:
            skipped += 1
            continue
        for version in versions:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = ".".join(str(p) for p in exc.path)
                errors.append(f"{ident} (Kubernetes {version}): {where}: {exc.message}")
            except kubernetes_validate.SchemaNotFoundError as exc:
                errors.append(f"{ident} (Kubernetes {version}): no schema for this kind ({exc}); "
                              "if it is a custom resource, add it to CRD_KINDS in deploy/validate.py")
        checked += 1
    return checked, skipped, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("-k", "--kubernetes-version", action="append", dest="versions",
                        help=f"repeatable; default {', '.join(DEFAULT_VERSIONS)}")
    args = parser.parse_args(argv)
    versions = tuple(args.versions or DEFAULT_VERSIONS)
    failed = False
    for path in args.files:
        checked, skipped, errors = validate_file(path, versions)
        for e in errors:
            print(f"INVALID {e}")
        failed |= bool(errors) or checked == 0
        print(f"{path}: {checked} objects valid (strict, Kubernetes {', '.join(versions)}); "
              f"{skipped} skipped by the custom-resource allowlist ({', '.join(sorted(k for _, k in CRD_KINDS))})"
              if not errors else f"{path}: {len(errors)} errors")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
