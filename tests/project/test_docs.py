"""The documentation's executable parts: docstring examples and the getting-started snippets.

* Every module of the package runs its docstring examples (``doctest``), and each public
  module exposes at least one example, in its own docstrings or in those of its public names.
* The "Ten lines" example of ``docs/getting_started.rst`` runs, and the install and test
  commands the page shows are the README's.
* Every Python code block of every page of ``docs/`` (```` ```python ```` fences in Markdown,
  ``.. code-block:: python`` and ``>>>`` examples in reST) runs, page by page, in order, in one
  namespace per page. Blocks whose real run takes minutes run in a fast setting: the explicit
  substitutions of :data:`FAST` (each must still match the page, so the mapping cannot go
  stale). The blocks that cannot run here are listed, with the reason, in :data:`NOT_RUN`; a
  listed block that no longer exists fails the test.

None of this needs Sphinx; ``bash docs/build.sh`` builds the site itself.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import numpy as np
import pytest
from doctest_support import run_doctests

import skflow
import skflow_experiments

ROOT = Path(__file__).resolve().parents[2]

#: Public modules (as in the API reference); those that do not exist yet are skipped.
PUBLIC_MODULES = [
    "skflow",
    "skflow.paths",
    "skflow.field",
    "skflow.solvers",
    "skflow.samplers",
    "skflow.pipeline",
    "skflow.projection",
    "skflow.metrics",
    "skflow.diagnostics",
    "skflow.tasks",
    "skflow.nn",
    "skflow.threads",
]


def _all_modules() -> list[str]:
    # the library and the experiments beside it (skflow_experiments/, run from a clone)
    names = ["skflow", "skflow_experiments"]
    for package in (skflow, skflow_experiments):
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            if info.name == "skflow.__main__":
                continue  # importing it is harmless, but it is a script: no examples
            names.append(info.name)
    return sorted(names)


ALL_MODULES = _all_modules()
#: The listed modules that exist, and every other module without a private path component.
CHECKED_PUBLIC_MODULES = sorted(
    set(PUBLIC_MODULES)
    | {m for m in ALL_MODULES if not any(p.startswith("_") for p in m.split("."))}
)


def _existing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _public_objects(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        if name.startswith("__") and name.endswith("__"):
            continue
        yield name, getattr(module, name)


@pytest.fixture(autouse=True)
def _quiet_numpy_printing():
    # Docstrings show NumPy's default printing; keep it whatever another test changed.
    with np.printoptions(legacy=False, precision=8, suppress=False):
        yield


@pytest.mark.parametrize("modname", ALL_MODULES)
def test_docstring_examples_pass(modname):
    run_doctests(modname)


@pytest.mark.parametrize("modname", CHECKED_PUBLIC_MODULES)
def test_public_module_has_examples(modname):
    if not _existing(modname):
        pytest.skip(f"{modname} does not exist (yet)")
    module = importlib.import_module(modname)
    finder = doctest.DocTestFinder(exclude_empty=True)
    examples = sum(len(t.examples) for t in finder.find(module, modname))
    for name, obj in _public_objects(module):
        if callable(obj) or isinstance(obj, type):
            try:
                found = finder.find(obj, f"{modname}.{name}", module=False, globs={})
            except ValueError:  # objects doctest cannot inspect (e.g. some C builtins)
                continue
            examples += sum(len(t.examples) for t in found)
    assert examples >= 1, (
        f"{modname} has no docstring example: add an 'Examples' section to the module or to "
        "one of its public functions or classes."
    )


# -- docs/getting_started.rst ------------------------------------------------------------------


def _code_blocks(text: str, language: str, *, with_options: bool = False) -> list:
    """Bodies of the ``.. code-block:: <language>`` directives of a reST text, at any
    indentation (with their option lines, such as ``:class: skip-test``, when
    ``with_options``)."""
    blocks = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = re.match(rf"^( *)\.\. code-block:: {language}\s*$", line)
        if not match:
            continue
        indent = len(match.group(1)) + 3
        options, body, j = [], [], i + 1
        while j < len(lines) and lines[j].startswith(" " * indent + ":"):
            options.append(lines[j].strip())
            j += 1
        while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" " * indent)):
            body.append(lines[j][indent:])
            j += 1
        code = "\n".join(body).strip()
        blocks.append(("\n".join(options), code) if with_options else code)
    return blocks


def test_getting_started_example_runs():
    text = (ROOT / "docs" / "getting_started.rst").read_text(encoding="utf-8")
    blocks = _code_blocks(text, "python")
    assert blocks, "docs/getting_started.rst has no Python example"
    namespace: dict = {}
    exec(compile(blocks[-1], "getting_started.rst", "exec"), namespace)
    assert namespace["X"].shape == (200, 2)
    assert namespace["paths"].shape[1:] == (10, 2)


def test_getting_started_commands_match_readme():
    """The page shows the README's two commands verbatim: the demo and the test command."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "getting_started.rst").read_text(encoding="utf-8")
    commands = [c.strip() for c in re.findall(r"```bash\n(.*?)\n\s*```", readme, re.S)]
    demo = [c for c in commands if "skflow demo" in c]
    test = re.search(r"<!-- test-command -->\s*```bash\n(.*?)\n\s*```", readme, re.S)
    assert demo and test, "README.md lost its demo or test command"
    # both create and activate the same virtual environment (no pip into a system Python, which
    # fails where it is externally managed, PEP 668)
    venv = "python3 -m venv .venv && . .venv/bin/activate && "
    assert demo[0].startswith(venv) and test.group(1).strip().startswith(venv)
    page_commands = _code_blocks(page, "bash")
    for command in (demo[0], test.group(1).strip()):
        assert command in page_commands, (
            f"docs/getting_started.rst does not show the README command {command!r}"
        )


# -- every code block of every page ----------------------------------------------------------

DOCS = ROOT / "docs"

#: Substitutions applied to a page's code before it runs: the same code at a small size, for
#: blocks whose real run takes minutes. ``(page, original text, replacement)``; every original
#: text must occur in the page's blocks.
FAST = [
    # a grid search over sigma_min on all digits: 4 classes, a third of their rows, 2 candidates
    (
        "bandwidth.md",
        "Xs = X[:, X.std(0) > 0]",
        "Xs, y = X[y < 4][::3][:, X.std(0) > 0], y[y < 4][::3]",
    ),  # noqa: E501
    ("bandwidth.md", 'grid = ["auto", 0.05, 0.5]', 'grid = ["auto", 0.5]'),
    # the one-liner trains and scores a network per fold within budget_s (minutes): without
    # the network (tests/samplers/test_few_shot.py trains it), one size, 2 folds, 1 repeat
    (
        "choosing.md",
        'FewShotSampler(new="classes", budget_s=360, random_state=0)',
        'FewShotSampler(new="classes", budget_s=0, support_size=10, n_splits=2, n_repeats=1, '
        "random_state=0)",
    ),
    # meta-training runs 2000 iterations by default (minutes): a few iterations, fewer steps
    # (``_sk`` is skflow, imported by the PRELUDE of these pages)
    (
        "choosing.md",
        "LearnedFlowSampler(training=TrainingOptions(max_iter=200))",
        "LearnedFlowSampler(training=TrainingOptions(max_iter=2), "
        "solver=_sk.SolverOptions(n_steps=4))",
    ),
    # the selectors score every candidate on class-grouped folds: 2 folds, 1 repeat, 2 arms
    ("choosing.md", "classical.default_candidates() + [", "classical.default_candidates()[:1] + ["),
    ("choosing.md", "n_splits=3, random_state=0)", "n_splits=2, n_repeats=1, random_state=0)"),
    (
        "meta_training.md",
        "LearnedFlowSampler(random_state=0).fit(tasks)",
        "LearnedFlowSampler(training=_sk.TrainingOptions(max_iter=10), "
        "solver=_sk.SolverOptions(n_steps=10), random_state=0).fit(tasks)",
    ),
    ("meta_training.md", "max_iter=300, batch_tasks=8,", "max_iter=30, batch_tasks=8,"),
    (
        "meta_training.md",
        "small.n_iter_, len(small.loss_curve_)                            # (300, 300)",  # noqa: E501
        "assert (small.n_iter_, len(small.loss_curve_)) == (30, 30)",
    ),
    # a support of 5,000 rows sampled twice: 1,000 rows
    (
        "scaling.md",
        "size=5_000)] + rng.normal(size=(5_000, 16))",
        "size=1_000)] + rng.normal(size=(1_000, 16))",
    ),
    # the rates of the mismatch flag over 200 supports per row: 3 supports per row
    (
        "diagnostics.md",
        "B, rng = 200, np.random.default_rng(0)",
        "B, rng = 3, np.random.default_rng(0)",
    ),  # noqa: E501
    # a Dask cluster: an in-process one, and a thousand samples instead of a million
    (
        "user_guide.rst",
        'client = Client("scheduler-address:8786")',
        "client = Client(processes=False, n_workers=1, dashboard_address=None)",
    ),
    (
        "user_guide.rst",
        "X = sampler.sample(1_000_000)",
        "X = sampler.sample(1_000)\n    client.close()",
    ),  # noqa: E501
]

#: Code run before a page's blocks: the names its text assumes (``(page, code)``).
PRELUDE = {
    "pretrained.md": "import numpy as np\nX = np.random.default_rng(0).normal(size=(40, 8))",
    # the option groups of FAST's substitutions, under a name no page uses
    "choosing.md": "import skflow as _sk",
    "meta_training.md": "import skflow as _sk",
}

#: Blocks that do not run here: ``(page, a line of the block) -> why``.
NOT_RUN = {
    ("inspection.md", "from diffusers import StableDiffusionPipeline"): (
        "needs diffusers, Stable Diffusion and IP-Adapter weights on disk, and a GPU"
    ),
}


def _md_python_blocks(text: str) -> list[str]:
    """Bodies of the ```python fences of a Markdown text, at any indentation."""
    blocks = []
    for match in re.finditer(r"^( *)```python[^\n]*\n(.*?)^\1```", text, re.S | re.M):
        indent = len(match.group(1))
        body = "\n".join(line[indent:] for line in match.group(2).splitlines())
        blocks.append(body.strip("\n"))
    return blocks


def _rst_python_blocks(text: str) -> list[str]:
    """Bodies of the ``.. code-block:: python`` directives and the ``>>>`` examples of a reST
    text, code-blocks first (reST pages use one kind or the other)."""
    blocks = [body for _, body in _code_blocks(text, "python", with_options=True)]
    examples = doctest.DocTestParser().get_examples(text)
    if examples:
        blocks.append("\n".join(e.source for e in examples))
    return blocks


def _page_blocks(name: str) -> list[str]:
    text = (DOCS / name).read_text(encoding="utf-8")
    return _md_python_blocks(text) if name.endswith(".md") else _rst_python_blocks(text)


DOC_PAGES = sorted(p.name for p in DOCS.iterdir() if p.suffix in (".md", ".rst"))
PAGES_WITH_CODE = [name for name in DOC_PAGES if _page_blocks(name)]


def test_every_page_with_code_is_checked():
    """The pages with Python blocks are found (the parser works) and the fast mappings and
    exclusions name pages that exist."""
    assert {"getting_started.rst", "user_guide.rst", "index.rst"} <= set(PAGES_WITH_CODE)
    for page, *_ in FAST:
        assert page in PAGES_WITH_CODE, f"FAST names {page}, which has no Python block"
    for page, _ in NOT_RUN:
        assert page in PAGES_WITH_CODE, f"NOT_RUN names {page}, which has no Python block"


@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_doc_page_code_runs(page, monkeypatch):
    """Every Python block of the page runs, in order, in one namespace (with :data:`FAST`'s
    substitutions; the blocks of :data:`NOT_RUN` excepted, each still present)."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(ROOT)
    blocks = _page_blocks(page)
    for p, line in NOT_RUN:
        if p == page:
            assert any(line in b for b in blocks), f"NOT_RUN: no block of {page} has {line!r}"
    subs = [(old, new) for p, old, new in FAST if p == page]
    for old, _ in subs:
        assert any(old in b for b in blocks), f"FAST: {old!r} no longer occurs in {page}"
    namespace: dict = {"__name__": "__main__"}
    if page in PRELUDE:
        exec(compile(PRELUDE[page], f"{page} (prelude)", "exec"), namespace)
    ran = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # advice such as MemorizationWarning is not an error
        for i, body in enumerate(blocks):
            if any(p == page and line in body for (p, line) in NOT_RUN):
                continue
            for old, new in subs:
                body = body.replace(old, new)
            exec(compile(body, f"docs/{page}, Python block {i + 1}", "exec"), namespace)
            ran += 1
    plt.close("all")
    assert ran >= 1
