"""The layering of SPEC section 5, enforced from the code itself (an AST walk of ``skflow/``).

Two rules:

1. *no private names across modules*: no module imports a ``_private`` name from another
   module (``from .x import _y``), nor reaches one through an imported module or class
   (``from . import field as F; F._y``). Private *modules* (``skflow._validation``,
   ``skflow.nn._training``) hold shared internals under public names and may be imported;
2. *layers import downward*: every skflow module belongs to a layer, and imports only the layers
   that :data:`ALLOWED` lists for it.

The experiments use the public API only, so they may import any public name of any layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "skflow"

#: Layer of a module, from its dotted path below ``skflow`` (first match of the prefixes).
LAYERS = (
    ("_validation", "helpers"),
    ("_array", "helpers"),
    ("threads", "helpers"),  # public: limit_threads, parallel_map, worker_threads
    ("exceptions", "helpers"),
    ("paths", "paths"),
    ("tasks", "tasks"),
    ("field", "field"),
    ("solvers", "solvers"),
    ("metrics", "metrics"),
    ("nn", "nn"),
    ("diagnostics", "diagnostics"),
    ("inspection", "inspection"),
    ("samplers", "samplers"),
    ("projection", "projection"),
    ("pipeline", "pipeline"),
    ("oversampling", "oversampling"),  # imbalanced-learn over-sampler (optional extra)
    ("experiments", "experiments"),
    # the stored form of a prior (card, weights, SHA-256): files only, read by the estimators
    ("priors.store", "priors"),
    # the priors' task law, recipes, training run and cards page: public API, like experiments
    ("priors", "experiments"),
    ("pretrain", "experiments"),  # deprecated alias of skflow.priors
    ("__main__", "app"),
    ("__init__", "app"),
)

_BASE = {"helpers"}
#: The layers each layer may import (besides itself).
ALLOWED = {
    "helpers": set(),
    "paths": _BASE,
    "tasks": _BASE | {"paths"},
    "field": _BASE | {"paths"},
    "solvers": _BASE,
    "metrics": _BASE,
    "nn": _BASE | {"paths", "field"},
    "diagnostics": _BASE | {"paths", "field", "solvers", "metrics"},
    "inspection": _BASE | {"paths", "field", "metrics"},
    "priors": _BASE,
    "samplers": _BASE | {"paths", "tasks", "field", "solvers", "metrics", "nn", "priors"},
    "projection": _BASE | {"paths", "field", "solvers", "metrics", "samplers"},
    "pipeline": _BASE | {"metrics", "samplers", "projection"},
    "oversampling": _BASE | {"metrics", "samplers", "projection", "pipeline"},
    "experiments": {name for _, name in LAYERS} - {"app"},
    "app": {name for _, name in LAYERS},
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> str:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise AssertionError(f"skflow.{module} belongs to no layer: add it to LAYERS")


def _resolve(path: Path, node: ast.ImportFrom) -> str | None:
    """Dotted target of an import inside skflow (relative to ``skflow``), or None."""
    if node.level == 0:
        mod = node.module or ""
        if mod == "skflow":
            return ""
        return mod[len("skflow.") :] if mod.startswith("skflow.") else None
    package = list(path.relative_to(ROOT).parent.parts)
    if node.level > 1:
        package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def _package(module: str) -> str:
    return module.rsplit(".", 1)[0] if "." in module else ""


def _imports(path: Path):
    """Yield ``(target_module, imported_names, lineno)`` for skflow imports of ``path``."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(path, node)
            if target is not None:
                yield target, [(a.name, a.asname or a.name) for a in node.names], node.lineno, tree
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("skflow."):
                    yield alias.name[len("skflow.") :], [], node.lineno, tree


def _is_module(dotted: str) -> bool:
    base = ROOT / Path(*dotted.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _private_violations(path: Path) -> list[str]:
    here = _module_name(path)
    out = []
    aliases = {}
    for target, names, line, _ in _imports(path):
        for name, asname in names:
            full = f"{target}.{name}" if target else name
            if name.startswith("_") and not name.startswith("__") and not _is_module(full):
                out.append(f"{here}:{line} imports private name {name} from {target}")
            aliases[asname] = full
    for node in ast.walk(ast.parse(path.read_text())) if aliases else ():
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            out.append(f"{here}:{node.lineno} uses private {aliases[node.value.id]}.{node.attr}")
    return out


def _layer_violations(path: Path) -> list[str]:
    here = _module_name(path)
    mine = _layer(here)
    out = []
    for target, names, line, _ in _imports(path):
        targets = [f"{target}.{n}" if target else n for n, _ in names] or [target]
        for full in targets:
            mod = full
            while mod and not _is_module(mod):
                mod = _package(mod)
            if not mod:
                continue
            theirs = _layer(mod)
            if theirs != mine and theirs not in ALLOWED[mine]:
                out.append(f"{here}:{line} ({mine}) imports skflow.{mod} ({theirs})")
    return out


FILES = sorted(ROOT.rglob("*.py"))


def test_every_module_has_a_layer():
    for path in FILES:
        _layer(_module_name(path))


def test_no_private_names_across_modules():
    problems = [v for path in FILES for v in _private_violations(path)]
    assert not problems, "\n".join(problems)


def test_layers_import_downward():
    problems = [v for path in FILES for v in _layer_violations(path)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "source, expect",
    [
        ("from .field import _check_bandwidth\n", "private name"),
        ("from . import field as F\nF._real_numpy(1, 'x')\n", "uses private"),
        ("from .samplers._base import _check_positive_int\n", "private name"),
        ("from .samplers._base import BaseFlowSampler as B\nB._score_one\n", "uses private"),
    ],
)
def test_private_rule_catches(tmp_path, source, expect, monkeypatch):
    # the checker itself must flag each kind of violation (a planted module at the top level)
    fake = ROOT / "metrics.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source)
    assert any(expect in v for v in _private_violations(fake))


def test_layer_rule_catches(monkeypatch):
    fake = ROOT / "metrics.py"  # metrics may not import samplers
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: "from .samplers import nw\n")
    assert any("imports skflow.samplers" in v for v in _layer_violations(fake))
