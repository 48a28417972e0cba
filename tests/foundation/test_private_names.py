"""No product module uses another app's private (underscore) name: `from apps.reports.content import _delta`, or
`content._delta` on a module of another app. A name with a leading underscore is its module's own business;
what another app needs is made public where it belongs. (Private *modules* are an import-linter contract in
pyproject.toml; names inside modules are beyond it, hence this walk over the source.)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Uses tolerated for now (path, module, name): none. A new one is a defect, not an entry here.
KNOWN: set[tuple[str, str, str]] = set()


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def app_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "apps" else None


def is_module(dotted: str) -> bool:
    """A module or package of apps/ (by its file: nothing is imported)."""
    path = ROOT.joinpath(*dotted.split("."))
    return app_of(dotted) is not None and (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file())


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def foreign_private_uses(source: str, module: str, *, is_package: bool = False) -> list[tuple[str, str]]:
    """(module, private name) pairs that `module`'s source takes from modules of other apps."""
    own = app_of(module)
    package = module if is_package else module.rsplit(".", 1)[0]
    tree = ast.parse(source)
    found: list[tuple[str, str]] = []
    aliases: dict[str, str] = {}  # local name -> another app's module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if app_of(alias.name) not in (None, own):
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source_module = _absolute(node, package)
            if app_of(source_module) in (None, own):
                continue
            for alias in node.names:
                if is_private(alias.name):
                    found.append((source_module, alias.name))
                elif is_module(f"{source_module}.{alias.name}"):
                    aliases[alias.asname or alias.name] = f"{source_module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            target = _dotted(node.value)
            head = target.split(".", 1)[0] if target else ""
            if head in aliases:
                found.append((aliases[head] + target[len(head):], node.attr))
            elif target and app_of(target) not in (None, own) and is_module(target):
                found.append((target, node.attr))
    return found


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def product_modules() -> list[tuple[Path, str, bool]]:
    """(path, dotted name, is a package's __init__) of every module under apps/."""
    out = []
    for path in sorted((ROOT / "apps").rglob("*.py")):
        rel = path.relative_to(ROOT)
        parts = rel.with_suffix("").parts
        is_package = parts[-1] == "__init__"
        out.append((rel, ".".join(parts[:-1] if is_package else parts), is_package))
    return out


def test_the_walk_finds_each_way_of_reaching_a_private_name() -> None:
    source = (
        "from apps.reports.content import _delta, pct\n"
        "from apps.reports import content\n"
        "import apps.usage.money as m\n"
        "import apps.usage.ledger\n"
        "from apps.dashboard.tables import _own\n"
        "x = content._printed_rows(m._secret, apps.usage.ledger._step, content.__name__, pct)\n"
    )
    assert sorted(foreign_private_uses(source, "apps.dashboard.selectors")) == [
        ("apps.reports.content", "_delta"),
        ("apps.reports.content", "_printed_rows"),
        ("apps.usage.ledger", "_step"),
        ("apps.usage.money", "_secret"),
    ]
    assert foreign_private_uses("from ..content import _delta\n", "apps.reports.api.views") == []
    assert foreign_private_uses("from ...usage.money import _x\n", "apps.reports.api.views") == [
        ("apps.usage.money", "_x")]
    assert foreign_private_uses("from ..usage import _y\n", "apps.reports", is_package=True) == [
        ("apps.usage", "_y")]


def test_no_product_module_uses_another_apps_private_name() -> None:
    seen: set[tuple[str, str, str]] = set()
    for path, module, is_package in product_modules():
        for source_module, name in foreign_private_uses(path.read_text(), module, is_package=is_package):
            seen.add((str(path), source_module, name))
    assert seen - KNOWN == set(), "make the name public where it lives, or move it to the app that uses it"
    assert KNOWN - seen == set(), "fixed: remove these from KNOWN"
