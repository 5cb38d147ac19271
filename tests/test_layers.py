"""Data flows one way — sources → evidence → signals → rules → findings → reports — and so do the
imports: a module may import from its own layer or a lower one, never from a higher one. Read from
the source, not assumed: a new upward import fails here with the module and the line."""
from __future__ import annotations

import ast

from conftest import ROOT

PACKAGE = ROOT / "diagnose"
# lowest first; a top-level module or package of diagnose/ belongs to exactly one layer
LAYERS = [
    {"", "values", "_compat", "cachedir", "tomlcache", "recache", "lazyre", "memo", "redact", "targets", "data", "clock"},   # "": the package's own __init__
    {"evidence"},
    {"sources"},
    {"capacity"},
    {"signals"},
    {"ruleset"},
    {"findings"},
    {"reports"},
    {"pipeline", "config"},
    {"live"},
    {"cli", "__main__"},
]
LEVEL = {name: i for i, names in enumerate(LAYERS) for name in names}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path):
    mod = ".".join(path.with_suffix("").relative_to(ROOT).parts)
    if mod.endswith(".__init__"):
        mod = mod[: -len(".__init__")]
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield mod, target, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield mod, alias.name, node.lineno


def test_every_module_has_a_layer():
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    tops.discard("__init__")
    assert tops <= set(LEVEL), f"modules with no layer in tests/test_layers.py: {sorted(tops - set(LEVEL))}"


def test_no_import_points_up_a_layer():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for mod, target, line in _imports(path):
            if target != "diagnose" and not target.startswith("diagnose."):
                continue
            src, dst = _top(mod), _top(target)
            if LEVEL[dst] > LEVEL[src]:
                upward.append(f"{path.relative_to(ROOT)}:{line}: {src} imports {target} (a higher layer)")
    assert not upward, "\n".join(upward)
