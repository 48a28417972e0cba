"""`promtool check rules` and `promtool test rules` on a shipped rule file: one helper for every rules file in
deploy/monitoring/ (the alert rules and the recording rules)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.harness.services import require_binary


def check_and_test_rules(rules: Path, tests: Path, rule_count: int) -> None:
    """The file loads with `rule_count` rules and its unit tests (run from their folder, as they name the file
    relatively) pass."""
    promtool = require_binary("promtool")
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {rule_count} rules found" in check.stdout
    run = subprocess.run([promtool, "test", "rules", str(tests)], cwd=tests.parent, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout
