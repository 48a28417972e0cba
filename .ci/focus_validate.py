#!/usr/bin/env python3
"""Validate FOCUS 1.2 CSV exports with the FinOps Foundation's focus-validator; exit 1 on any failed rule.

    python .ci/focus_validate.py --install          # make the validator's venv (once; needs the package index)
    python .ci/focus_validate.py EXPORT.csv [...]   # validate; prints the summary, exits 1 on a failed rule

How it is run here (docs/reports.md, "Validating a FOCUS export"): focus-validator
2.x needs Python >= 3.12 (pyenv has one), so it lives in its own venv (FOCUS_VALIDATOR_VENV, default
~/.cache/gpufinops/focus-validator); it is run from its site-packages directory (it opens its currency list by a
relative path) with --block-download (offline: the bundled 1.2 rule model), and it exits 0 even when rules
fail, so the summary line and the failed rules are read from its output.

Applicability criteria: the ones that are true of gpufinops' export (names of accounts, usage measured, unit
prices from a rate card, sub-accounts, billing by provisioned resources with resource types, tags, two sub-account
types); the others (regions, zones, commitment discounts, capacity reservations, public price lists, virtual
currencies) are not offered, so their rules are skipped.

One defect of the bundled model is read as the model means it, and said so in the output: InvoiceId-C-003-C
("InvoiceId nullability") is the OR of InvoiceId-C-004-C ("MUST be null when the charge is not associated with an
invoice") and InvoiceId-C-005-C ("MUST NOT be null when it is"), but those two leaves carry no condition in
model-1.2.0.1, so the validator also runs each alone and one of them always fails, whatever the data (with the
column absent, seven rules fail instead). A failed rule counts unless it is an alternative (a CheckModelRule item)
of an OR rule that passed; every such excuse is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

VALIDATOR = "focus-validator==2.2.1"
PINS = ["numpy<2", "pyarrow<18"]
VERSION = "1.2"
CRITERIA = ",".join([
    "ACCOUNT_NAMING_SUPPORTED",
    "USAGE_MEASUREMENT_SUPPORTED",
    "UNIT_PRICING_SUPPORTED",
    "NEGOTIATED_PRICING_SUPPORTED",
    "SUB_ACCOUNT_SUPPORTED",
    "MULTIPLE_SUB_ACCOUNT_TYPES_SUPPORTED",
    "BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED",
    "RESOURCE_TYPE_ASSIGNMENT_SUPPORTED",
    "TAGGING_SUPPORTED",
])
SUMMARY = re.compile(r"Total: (\d+) \| Pass: (\d+) \| Fail: (\d+) \| Skipped: (\d+)")
RESULT = re.compile(r"^\S+\s+([A-Za-z]+-[A-Z]-\d{3}-[A-Z]): (PASS|FAIL|SKIPPED)\b(.*)$")


def venv_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpufinops" / "focus-validator"
    return Path(os.environ.get("FOCUS_VALIDATOR_VENV", default))


def python312() -> str:
    """A Python 3.12 interpreter: pyenv's (the `python3.12` shim refuses while the global version is 3.11)."""
    candidates = []
    if shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
        versions = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        candidates += [f"{root}/versions/{v}/bin/python" for v in versions if re.match(r"^3\.1[2-9]", v)]
    candidates += [p for p in (shutil.which("python3.13"), shutil.which("python3.12")) if p]
    for candidate in candidates:
        ok = subprocess.run([candidate, "-c", "import sys; assert sys.version_info >= (3, 12)"], capture_output=True)
        if ok.returncode == 0:
            return candidate
    sys.exit("focus-validator needs Python >= 3.12 and none was found (pyenv install 3.12)")


def install() -> Path:
    venv = venv_dir()
    binary = venv / "bin" / "focus-validator"
    if not binary.exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([python312(), "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", VALIDATOR, *PINS], check=True)
    return binary


def site_packages(venv: Path) -> Path:
    code = "import focus_validator, os; print(os.path.dirname(os.path.dirname(focus_validator.__file__)))"
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def or_alternatives(model: dict) -> dict[str, str]:
    """rule id -> the OR rule it is an alternative of (CheckModelRule items of an OR requirement)."""
    out: dict[str, str] = {}
    for rule_id, rule in model["ModelRules"].items():
        req = rule.get("ValidationCriteria", {}).get("Requirement") or {}
        if req.get("CheckFunction") == "OR":
            for item in req.get("Items", []):
                if item.get("CheckFunction") == "CheckModelRule":
                    out[item["ModelRuleId"]] = rule_id
    return out


def validate(path: Path) -> bool:
    venv = venv_dir()
    binary = venv / "bin" / "focus-validator"
    if not binary.exists():
        sys.exit(f"focus-validator is not installed in {venv}: run python .ci/focus_validate.py --install")
    site = site_packages(venv)
    run = subprocess.run([str(binary), "--data-file", str(path.resolve()), "--validate-version", VERSION,
                          "--block-download", "--applicability-criteria", CRITERIA],
                         cwd=site, capture_output=True, text=True)
    output = run.stdout + run.stderr
    summary = SUMMARY.search(output)
    if summary is None:
        print(output[-4000:])
        print(f"{path}: no summary line from focus-validator (exit {run.returncode})")
        return False
    results: dict[str, tuple[str, str]] = {}
    for line in output.splitlines():
        m = RESULT.match(line.strip())
        if m:
            results[m[1]] = (m[2], m[3].strip())
    model = json.loads(next((site / "focus_validator" / "rules").glob(f"model-{VERSION}*.json")).read_text())
    parents = or_alternatives(model)
    failed = [r for r, (status, _) in results.items() if status == "FAIL"]
    excused = [r for r in failed if r in parents and results.get(parents[r], ("",))[0] == "PASS"]
    counted = [r for r in failed if r not in excused]
    total, passed, fails, skipped = summary.groups()
    print(f"{path}: focus-validator {VERSION}: Total: {total} | Pass: {passed} | Fail: {fails} | Skipped: {skipped}")
    for rule in excused:
        print(f"  excused {rule}: an alternative of {parents[rule]}, which passed (the model gives the "
              f"alternative no condition of its own): {results[rule][1][:160]}")
    for rule in counted:
        print(f"  FAILED {rule}: {results[rule][1][:300]}")
    print(f"{path}: {len(counted)} failed rule(s)")
    return not counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--install", action="store_true", help="create the validator's venv if missing")
    args = parser.parse_args()
    if args.install:
        print(f"focus-validator: {install()}")
    results = [validate(f) for f in args.files]  # every file, even after a failure
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
