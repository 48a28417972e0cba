"""No app uses another app's private (underscore) name: what an app shares is its public names, so a private
helper can change without breaking a reader elsewhere (issue 20). Checked on the source with `ast`, no Django."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parents[2] / "apps"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _app_of(module: str) -> str | None:
    """`apps.<app>...` -> `<app>`; None for anything outside apps."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "apps" else None


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` as written, when the expression is a plain dotted name."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(names)])


def violations(source: str, app: str) -> list[str]:
    """Private names of other apps that a module of `app` imports or reads as an attribute."""
    tree = ast.parse(source)
    foreign: dict[str, str] = {}  # local name -> the other app's module (or name) it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            other = _app_of(node.module)
            if other is None or other == app:
                continue
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                foreign[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                other = _app_of(alias.name)
                if other is not None and other != app:
                    foreign[alias.asname or alias.name.split(".")[0]] = alias.name
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        base = _dotted(node.value)
        if base is None:
            continue
        root, _, rest = base.partition(".")
        target = foreign.get(root)
        if target is None and root == "apps":  # `import apps` then apps.<other>.<module>._name
            target = base if _app_of(base) not in (None, app) else None
        if target is not None:
            found.append(f"line {node.lineno}: {base}.{node.attr} ({target}{'.' + rest if rest else ''})")
    return found


@pytest.mark.parametrize(("source", "app", "expected"), [
    ("from apps.reports.content import _delta, pct", "dashboard", ["from apps.reports.content import _delta"]),
    ("from apps.reports import content\nx = content._printed_rows", "dashboard", ["content._printed_rows"]),
    ("import apps.reports.content as c\nc._delta(1, 2)", "dashboard", ["c._delta"]),
    ("import apps.reports.content\napps.reports.content._delta(1, 2)", "dashboard", ["apps.reports.content._delta"]),
    ("from apps.reports.models import Edition\nEdition.objects._private()", "dashboard", ["Edition.objects._private"]),
    ("from apps.reports.content import _delta", "reports", []),  # its own app
    ("from apps.dashboard.selectors._parts import x", "dashboard", []),
    ("from apps.reports import content\nx = content.__name__", "dashboard", []),  # dunders are not private
    ("from apps.reports.content import pct\nx = self._cache", "dashboard", []),  # not another app's
    ("from .content import _delta", "dashboard", []),  # relative: its own app
])
def test_the_check_finds_private_imports_and_attributes_of_other_apps(source, app, expected):
    found = violations(source, app)
    assert len(found) == len(expected) and all(e in f for e, f in zip(expected, found, strict=True)), found


def test_no_app_uses_another_apps_private_names():
    files = sorted(APPS.rglob("*.py"))
    assert len(files) > 50, "the apps were not found"
    found = []
    for path in files:
        app = path.relative_to(APPS).parts[0]
        found += [f"{path.relative_to(APPS.parent)} {v}" for v in violations(path.read_text(), app)]
    assert not found, "another app's private names:\n" + "\n".join(found)
