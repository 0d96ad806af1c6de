"""The layering of SPEC section 5, enforced from the code itself (an AST walk of ``skflow/``).

Rules inside the library:

1. *no private names across modules*: no module imports a ``_private`` name from another
   module (``from .x import _y``), nor reaches one through an imported module or class
   (``from . import field as F; F._y``). Private *modules* (``skflow._validation``,
   ``skflow.nn._training``) hold shared internals under public names and may be imported;
2. *layers import downward*: every skflow module belongs to a layer, and imports only the layers
   that :data:`ALLOWED` lists for it. ``from skflow import X`` (or ``from .. import X`` for a
   name that is no module) imports the package's ``__init__``, the top layer: no module below
   it may do so.

Rules beside it: the experiments (``skflow_experiments/``), the benchmarks and the examples use
skflow's public API only (no ``_private`` module, name or attribute of skflow), and skflow never
imports them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "skflow"
#: The folders beside the package that use its public API only.
OUTSIDE = ("skflow_experiments", "benchmarks", "examples")

#: Layer of a module, from its dotted path below ``skflow`` (first match of the prefixes).
LAYERS = (
    ("_validation", "helpers"),
    ("_array", "helpers"),
    ("threads", "helpers"),  # public: limit_threads, parallel_map, worker_threads
    ("exceptions", "helpers"),
    ("_install", "helpers"),  # the install hints of the optional extras
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
    # (the stored form of a prior, samplers.prior_store, is the estimators' own: files only)
    # the priors' task law, recipes, training run (python -m skflow.priors) and cards page:
    # above the estimators, below the package's __init__
    ("priors", "training"),
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
    "samplers": _BASE | {"paths", "tasks", "field", "solvers", "metrics", "nn"},
    "projection": _BASE | {"paths", "field", "solvers", "metrics", "samplers"},
    "pipeline": _BASE | {"metrics", "samplers", "projection"},
    "oversampling": _BASE | {"metrics", "samplers", "projection", "pipeline"},
    "training": {name for _, name in LAYERS} - {"app"},
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
    """Dotted target of an import inside skflow (relative to ``skflow``; ``""`` is the package's
    ``__init__``), or None."""
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
                if alias.name == "skflow":
                    yield "", [], node.lineno, tree
                elif alias.name.startswith("skflow."):
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
            mod = mod or "__init__"  # a name of the package itself: its __init__
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


@pytest.mark.parametrize(
    "source",
    ["from skflow import LearnedFlowSampler\n", "import skflow\n", "from .. import NWField\n"],
)
def test_layer_rule_catches_the_package_init(monkeypatch, source):
    # a name of skflow/__init__ is an arrow to the top layer, from any layer below it
    fake = ROOT / "priors" / "training.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source)
    assert any("imports skflow.__init__ (app)" in v for v in _layer_violations(fake))


# -- beside the package: experiments, benchmarks, examples ----------------------------------


def _private(dotted: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in dotted.split("."))


def _outside_violations(path: Path, source: str | None = None) -> list[str]:
    """``_private`` skflow (or skflow_experiments) modules, names and attributes that a file
    beside the package uses; relative imports (inside skflow_experiments) are its own."""
    tree = ast.parse(path.read_text() if source is None else source)
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    out, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            root = node.module.split(".")[0]
            if root not in ("skflow", "skflow_experiments"):
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _private(full):
                    out.append(f"{where}:{node.lineno} imports {full}")
                aliases[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ("skflow", "skflow_experiments"):
                    continue
                if _private(alias.name):
                    out.append(f"{where}:{node.lineno} imports {alias.name}")
                bound = alias.asname or alias.name.split(".")[0]
                aliases[bound] = alias.name if alias.asname else bound
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain, value = [node.attr], node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in aliases:
            full = ".".join([aliases[value.id], *reversed(chain)])
            if _private(full):
                out.append(f"{where}:{node.lineno} uses {full}")
    return sorted(set(out))


OUTSIDE_FILES = sorted(p for folder in OUTSIDE for p in (REPO / folder).rglob("*.py"))


def test_outside_files_are_found():
    folders = {p.relative_to(REPO).parts[0] for p in OUTSIDE_FILES}
    assert folders == set(OUTSIDE)
    assert not (ROOT / "experiments").exists(), "the experiments live beside the package"


def test_experiments_and_benchmarks_use_the_public_api_only():
    problems = [v for path in OUTSIDE_FILES for v in _outside_violations(path)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "source, expect",
    [
        ("from skflow.samplers._fitted import fitted_config\n", "skflow.samplers._fitted"),
        ("from skflow._array import numpy_support_ranges\n", "skflow._array"),
        ("from skflow.field import _check\n", "skflow.field._check"),
        ("import skflow._array as A\n", "skflow._array"),
        ("from skflow import field\nfield._Problem(1)\n", "skflow.field._Problem"),
        ("import skflow\nskflow.samplers._fitted.FITTED\n", "skflow.samplers._fitted"),
        ("from skflow_experiments._io import RunLog\n", "skflow_experiments._io"),
    ],
)
def test_outside_rule_catches(source, expect):
    found = _outside_violations(REPO / "benchmarks" / "planted.py", source)
    assert any(expect in v for v in found), found


def test_outside_rule_allows_the_public_api():
    source = (
        "from skflow import NWFlowSampler\nimport skflow.field as F\nF.NWField\n"
        "from skflow_experiments.protocol import mmd2_both\nfrom ._io import RunLog\n"
    )
    assert _outside_violations(REPO / "skflow_experiments" / "planted.py", source) == []


def test_the_library_never_imports_what_lies_beside_it():
    problems = []
    for path in FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                if name.split(".")[0] in OUTSIDE:
                    problems.append(f"{path.relative_to(REPO)}:{node.lineno} imports {name}")
    assert not problems, "\n".join(problems)
