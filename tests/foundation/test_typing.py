"""mypy's configuration (pyproject.toml [tool.mypy]): the rules modules are checked as `mypy --strict` would.

mypy has no per-module `strict` (set in an override, it turns strict mode on for every module), so the config
lists the flags. This test reads the flags `--strict` stands for from mypy's own help, so a mypy release that
adds one fails here instead of leaving the rules modules quietly less strict.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES_MODULES = {
    "apps.inventory.gpus",
    "apps.inventory.gpus.*",
    "apps.inventory.teams",
    "apps.inventory.workloads",
    "apps.usage.ledger",
    "apps.usage.holding",
    "apps.usage.money",
    "apps.usage.figures",
    "apps.findings.rules",
    "apps.findings.accelerator_rules",
}


def mypy_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def strict_flags() -> dict[str, bool]:
    """The config keys and values `mypy --strict` turns on, read from `mypy --help`."""
    text = subprocess.run([sys.executable, "-m", "mypy", "--help"], capture_output=True, text=True, check=True).stdout
    listed = re.search(r"--strict\s+Strict mode; enables the following flags:(.*?)\n(?: {1,4}-|\n)", text, re.S)
    assert listed, "mypy --help no longer lists what --strict enables"
    flags = re.findall(r"--([a-z-]+)", " ".join(listed.group(1).split()).replace("- ", "-"))
    assert len(flags) >= 10, flags
    return {f.removeprefix("no-").replace("-", "_"): not f.startswith("no-") for f in flags}


def per_module_options() -> frozenset[str]:
    from mypy.options import PER_MODULE_OPTIONS

    return frozenset(PER_MODULE_OPTIONS)


def test_strict_flags_parsed_from_help() -> None:
    flags = strict_flags()
    assert flags["disallow_untyped_defs"] is True
    assert flags["implicit_reexport"] is False


def test_rules_modules_get_every_strict_flag() -> None:
    config = mypy_config()
    [rules] = [o for o in config["overrides"] if set(o["module"]) & RULES_MODULES]
    assert set(rules["module"]) == RULES_MODULES
    assert "strict" not in rules, "a per-module `strict` makes every module strict"
    per_module = per_module_options()
    missing = {}
    for flag, value in strict_flags().items():
        where = rules if flag in per_module else config
        if where.get(flag) != value:
            missing[flag] = value
    assert not missing, f"strict flags not set (per-module ones in the rules override, the rest globally): {missing}"


def test_whole_project_is_checked() -> None:
    config = mypy_config()
    assert config["files"] == ["apps", "gpufinops"]
    assert config["check_untyped_defs"] is True
    assert "strict" not in config
