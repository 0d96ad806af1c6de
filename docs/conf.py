"""Sphinx configuration of the skflow documentation.

Build with ``bash docs/build.sh`` (warnings are errors). Everything here works offline:

* **API reference** -- generated at configuration time for every public module of the
  package: those of ``API_MODULES`` that exist, in that order, each followed by its public
  submodules, then any other module without a private (``_``) path component. One page per
  module (its docstring and a summary table of its ``__all__``) and one per public object,
  written to ``docs/generated/`` (ignored by git). An object exported by several modules is
  documented once, where it is listed first; a module that only re-exports gets no page. A
  module that is not there yet is skipped; one that exists but fails to import fails the
  build, and a public name without a page is a warning (so an error under ``-W``).
* **Intersphinx** -- no inventory is downloaded. Python, SciPy and scikit-learn use the
  inventories of Debian's documentation packages shipped in ``_static/inv/`` (python3.11-doc,
  python-scipy-doc 1.10, python-sklearn-doc 1.2: older versions, but the object URLs are
  stable); NumPy and PyTorch, which have no such package, get minimal inventories written
  below from a hand-made list of the names our docstrings use. ``SKFLOW_DOCS_ONLINE=1`` uses the
  projects' live inventories instead (needs the network). ``nitpicky`` stays off, so an
  unresolved reference to an external name renders as plain text instead of failing.
* **MathJax 3** (``tex-chtml.js`` and its fonts, Apache-2.0) is vendored in
  ``_static/mathjax/`` so formulas render without a CDN.
* **Gallery** -- sphinx-gallery runs only ``examples/plot_*.py`` (quick by contract);
  the other examples are rendered without running.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import sys
import zlib
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))

import skflow  # noqa: E402

# -- project ---------------------------------------------------------------------------------
project = "skflow"
author = "the skflow developers"
copyright = "2026, the skflow developers"
release = skflow.__version__
version = re.sub(r"(\.dev\d*|rc\d*|a\d*|b\d*)$", "", release)

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# ``inv`` (relative to ``_static``): the intersphinx inventories are read, not published.
exclude_patterns = [
    "_build",
    "Thumbs.db",
    ".DS_Store",
    "_static/inv",
    "inv/*",
    "**.ipynb_checkpoints",
]
# Sphinx-gallery writes the executed examples' figures next to the generated pages; nothing
# else in the source tree is written by the build except ``generated/`` and ``auto_examples/``.

# Functions in ``sphinx_gallery_conf`` (``reset_argv`` below) cannot be pickled into Sphinx's
# environment cache; the only consequence is a full rebuild each time, which build.sh does
# anyway. This silences exactly that message and nothing else.
suppress_warnings = ["config.cache"]

# -- autodoc / autosummary / numpydoc -----------------------------------------------------------
autosummary_generate = False  # pages are written below, from the objects that exist
autodoc_typehints = "none"  # numpydoc docstrings carry the types
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = True
numpydoc_xref_aliases = {
    "ndarray": "numpy.ndarray",
    "array-like": ":term:`array-like <array_like>`",
    "Tensor": "torch.Tensor",
    "torch.Tensor": "torch.Tensor",
    "nn.Module": "torch.nn.Module",
    "nn.Parameter": "torch.nn.Parameter",
    "RandomState": "numpy.random.RandomState",
    "Generator": "numpy.random.Generator",
    "OTPath": "skflow.paths.OTPath",
    "ODESolution": "skflow.solvers.ODESolution",
    "NWFlowSampler": "skflow.NWFlowSampler",
}
# Words of type descriptions that are not names to link ("ndarray of shape (n, d)").
numpydoc_xref_ignore = set(
    """of or and shape optional default instance array sequence callable scalars scalar
    n m d k T B H n_features n_samples heads transformer estimator tensor buffers object
    function""".split()
)

# -- API pages: generated from the modules that exist -------------------------------------------
#: (module, one-line description) in the order of the API reference.
API_MODULES = [
    ("skflow", "Estimators and pipelines exported at the top level."),
    ("skflow.paths", "The probability path and its schedule."),
    ("skflow.field", "The exact Nadaraya-Watson velocity field of a support set (NumPy/Torch)."),
    ("skflow.solvers", "ODE solvers for NumPy arrays and Torch tensors."),
    ("skflow.samplers", "Support-conditioned samplers (scikit-learn estimators)."),
    ("skflow.pipeline", "Sampling pipelines: transformers followed by a sampler."),
    ("skflow.oversampling", "Few-shot oversampling for imbalanced-learn (optional extra)."),
    ("skflow.projection", "Projections before kernel smoothing."),
    (
        "skflow.metrics",
        "MMD², energy distance, classifier test, precision/recall, memorisation and their "
        "panel; effective sample size; attention-vs-NW weight correlation.",
    ),
    ("skflow.diagnostics", "Diagnosis of the failure regimes of the plug-in field."),
    ("skflow.inspection", "Attention inspector: any model's attention calls vs NW weights."),
    ("skflow.tasks", "Meta-distributions of tasks."),
    ("skflow.priors", "The shipped priors: stored form, task law, recipes and training run."),
    ("skflow.nn", "Torch modules: exact NW heads and the learned velocity network."),
    ("skflow.threads", "Thread counts set deliberately: thread-count-independent results."),
]

GENERATED = DOCS / "generated"

#: Pages of the toctree in index.rst that other contributors write; an entry whose file does
#: not exist (yet) is dropped from the toctree instead of breaking the build.
OPTIONAL_PAGES = ("performance", "learned", "diagnostics", "robustness", "results", "pretrained")
#: Filled below: module -> list of (public name, canonical full name, or None when the object
#: is documented on that module's page).
API_INDEX: dict[str, list[tuple[str, str]]] = {}


def _public_names(module) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, obj in vars(module).items()
            if not n.startswith("_")
            and getattr(obj, "__module__", "").startswith(module.__name__)
            and (inspect.isclass(obj) or inspect.isfunction(obj))
        ]
    return [n for n in names if not (n.startswith("__") and n.endswith("__"))]


def _object_page(fullname: str, obj) -> str:
    modname, _, name = fullname.rpartition(".")
    title = f"{fullname}\n{'=' * len(fullname)}\n\n.. currentmodule:: {modname}\n\n"
    if inspect.isclass(obj):
        # Inherited members are shown only from skflow's own bases; those of scikit-learn,
        # Torch and the standard library are documented by their projects. (autodoc's
        # ``:inherited-members: A, B`` hides the members defined in the classes named.)
        stop = sorted(
            {c.__name__ for c in inspect.getmro(obj)[1:] if not c.__module__.startswith("skflow")}
        )
        return (
            title
            + f".. autoclass:: {name}\n   :members:\n"
            + (f"   :inherited-members: {', '.join(stop)}\n" if stop else "")
            + "   :exclude-members: extra_repr\n"
            + "   :special-members: __call__\n"
        )
    if inspect.isfunction(obj) or inspect.isbuiltin(obj) or callable(obj):
        return title + f".. autofunction:: {name}\n"
    # Data: ``autodata`` would show the docstring of the value's type (``tuple``...); show
    # the value and the ``#:`` comment of the source instead.
    doc = _data_doc(modname, name)
    return (
        title
        + f".. py:data:: {name}\n   :value: {obj!r}\n\n"
        + "".join(f"   {line}\n" for line in doc)
    )


def _data_doc(modname: str, name: str) -> list[str]:
    """Lines of the ``#:`` comment documenting ``name`` in its module's source, if any."""
    from sphinx.errors import PycodeError
    from sphinx.pycode import ModuleAnalyzer

    try:
        docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
    except PycodeError:
        return []
    return [line for line in docs.get(("", name), []) if line.strip()]


def _is_data(obj) -> bool:
    return not (inspect.isclass(obj) or callable(obj))


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _is_public_module(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def api_module_order() -> list[tuple[str, str]]:
    """``API_MODULES`` that exist, each followed by its public submodules, then any other
    public module of the package: every public module of skflow, in reading order."""
    import pkgutil

    discovered = sorted(
        info.name
        for info in pkgutil.walk_packages(skflow.__path__, prefix="skflow.")
        if _is_public_module(info.name)
    )
    order: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(modname: str, blurb: str | None) -> None:
        if modname in seen or importlib.util.find_spec(modname) is None:
            return  # not written yet: no page, no warning
        seen.add(modname)
        order.append((modname, blurb))
        for sub in discovered:
            if sub.startswith(modname + ".") and sub.count(".") == modname.count(".") + 1:
                add(sub, None)

    for modname, blurb in API_MODULES:
        if modname != "skflow":
            add(modname, blurb)
        else:  # the top level first, its subpackages in the order of API_MODULES
            seen.add(modname)
            order.append((modname, blurb))
    for modname in discovered:
        add(modname, None)
    return order


def _first_line(module) -> str:
    doc = inspect.getdoc(module) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")


def generate_api_pages() -> list[str]:
    """Write ``generated/api/*.rst``, ``generated/reference/*.rst`` and the index table of
    ``api.rst``; return the names of the documented modules."""
    documented: dict[int, str] = {}
    modules = []
    pages: set[Path] = set()
    blurbs: dict[str, str] = {}
    for modname, blurb in api_module_order():
        module = importlib.import_module(modname)  # an ImportError here fails the build
        entries = []
        own = []
        for name in _public_names(module):
            obj = getattr(module, name)  # AttributeError here = a broken __all__: fail loudly
            fullname = f"{modname}.{name}"
            canonical = documented.setdefault(id(obj), fullname)
            entries.append((name, None if canonical == fullname else canonical))
            if canonical == fullname:
                own.append(name)
        if blurb is None and not own:
            continue  # a submodule whose names are all documented elsewhere: no page
        for name in own:
            page = GENERATED / "reference" / f"{modname}.{name}.rst"
            _write_if_changed(page, _object_page(f"{modname}.{name}", getattr(module, name)))
            pages.add(page)
        modules.append(modname)
        blurbs[modname] = blurb or _first_line(module)
        API_INDEX[modname] = entries
        lines = [
            f"{modname}\n{'=' * len(modname)}\n",
            f".. automodule:: {modname}\n   :no-members:\n",
            f".. currentmodule:: {modname}\n",
        ]
        if entries:
            lines.append("Public names\n------------\n")
        code = [n for n in own if not _is_data(getattr(module, n))]
        data = [n for n in own if _is_data(getattr(module, n))]
        if code:
            lines.append(".. autosummary::\n   :nosignatures:\n")
            lines.append("".join(f"   {n}\n" for n in code))
        if data:
            lines.append("".join(f"- :py:data:`{n}` = ``{getattr(module, n)!r}``\n" for n in data))
        if own:
            lines.append(".. toctree::\n   :hidden:\n")
            lines.append("".join(f"   ../reference/{modname}.{n}\n" for n in own))
        reexports = [(n, c) for n, c in entries if c is not None]
        if reexports:
            lines.append("Also importable from this module (documented where listed):\n")
            lines.append("".join(f"- ``{modname}.{n}``: :py:obj:`{c}`\n" for n, c in reexports))
        page = GENERATED / "api" / f"{len(modules):02d}-{modname}.rst"
        _write_if_changed(page, "\n".join(lines))
        pages.add(page)
    # The index of api.rst: one row per module, with its public names.
    rows = [
        ".. list-table::\n   :header-rows: 1\n   :widths: 25 75\n",
        "   * - module\n     - contents\n",
    ]
    for modname in modules:
        names = ", ".join(
            f":py:obj:`{name} <{canonical or modname + '.' + name}>`"
            for name, canonical in API_INDEX[modname]
        )
        row = f"   * - :mod:`{modname}`\n     - {blurbs[modname]}"
        if names:
            row += f"\n\n       {names}"
        rows.append(row + "\n")
    _write_if_changed(GENERATED / "api_index.inc", "\n".join(rows))
    # Remove pages of names that disappeared, so the glob toctree stays exact.
    for folder in ("api", "reference"):
        for stale in (GENERATED / folder).glob("*.rst"):
            if stale not in pages:
                stale.unlink()
    return modules


API_MODULES_FOUND = generate_api_pages()
# ``.. only:: has_<module>`` blocks in the pages describe optional modules when they exist.
for _modname in API_MODULES_FOUND:
    tags.add("has_" + _modname.rpartition(".")[2])  # noqa: F821 (provided by Sphinx)

# -- intersphinx: local inventories only -----------------------------------------------------
INV = DOCS / "_static" / "inv"
_MINIMAL_INVENTORIES = {
    # Hand-made: only the NumPy/Torch names skflow's docstrings refer to, at the URLs of
    # those projects' (stable) documentation layouts.
    "numpy": (
        "NumPy",
        [
            ("numpy.ndarray", "py:class", "reference/generated/numpy.ndarray.html#$"),
            ("numpy.dtype", "py:class", "reference/generated/numpy.dtype.html#$"),
            ("numpy.random.Generator", "py:class", "reference/random/generator.html#$"),
            ("numpy.random.RandomState", "py:class", "reference/random/legacy.html#$"),
            ("numpy.random.default_rng", "py:function", "reference/random/generator.html#$"),
            ("numpy.median", "py:function", "reference/generated/numpy.median.html#$"),
            ("numpy.float32", "py:attribute", "reference/arrays.scalars.html#$"),
            ("numpy.float64", "py:attribute", "reference/arrays.scalars.html#$"),
            ("array_like", "std:term", "glossary.html#term-array_like"),
        ],
    ),
    "torch": (
        "PyTorch",
        [
            ("torch.Tensor", "py:class", "tensors.html#$"),
            ("torch.Generator", "py:class", "generated/torch.Generator.html#$"),
            ("torch.device", "py:class", "tensor_attributes.html#$"),
            ("torch.nn.Module", "py:class", "generated/torch.nn.Module.html#$"),
            (
                "torch.nn.Parameter",
                "py:class",
                "generated/torch.nn.parameter.Parameter.html#torch.nn.parameter.Parameter",
            ),
            (
                "torch.nn.functional.scaled_dot_product_attention",
                "py:function",
                "generated/torch.nn.functional.scaled_dot_product_attention.html#$",
            ),
            ("torch.compile", "py:function", "generated/torch.compile.html#$"),
        ],
    ),
}


def _write_minimal_inventory(key: str) -> str:
    project_name, entries = _MINIMAL_INVENTORIES[key]
    body = "".join(f"{name} {role} 1 {uri} -\n" for name, role, uri in entries)
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {project_name}\n# Version: \n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    path = GENERATED / "inv" / f"{key}.inv"
    data = header.encode() + zlib.compress(body.encode())
    if not path.exists() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return str(path)


_URLS = {
    "python": "https://docs.python.org/3/",
    "numpy": "https://numpy.org/doc/stable/",
    "scipy": "https://docs.scipy.org/doc/scipy/",
    "sklearn": "https://scikit-learn.org/stable/",
    "torch": "https://docs.pytorch.org/docs/stable/",
}
if os.environ.get("SKFLOW_DOCS_ONLINE") == "1":
    intersphinx_mapping = {key: (url, None) for key, url in _URLS.items()}
else:
    intersphinx_mapping = {}
    for key, url in _URLS.items():
        if key in _MINIMAL_INVENTORIES:
            intersphinx_mapping[key] = (url, _write_minimal_inventory(key))
        elif (INV / f"{key}.inv").exists():
            intersphinx_mapping[key] = (url, str(INV / f"{key}.inv"))
intersphinx_timeout = 5
nitpicky = False

# -- math --------------------------------------------------------------------------------------
if (DOCS / "_static" / "mathjax" / "tex-chtml.js").exists():
    mathjax_path = "mathjax/tex-chtml.js"  # relative to _static: works offline

# -- MyST (Markdown pages) ----------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
myst_dmath_double_inline = True

# -- HTML ------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skflow {release}"
html_static_path = ["_static"]
html_css_files = ["skflow.css"]
html_show_sourcelink = False
html_theme_options = {
    "navbar_align": "left",
    "header_links_before_dropdown": 5,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_context = {"default_mode": "light"}
# Single pages have no sub-pages: no (empty) left sidebar, more room for formulas.
html_sidebars = {
    page: []
    for page in (
        "index",
        "getting_started",
        "theory",
        "user_guide",
        "results",
        "changelog",
        *OPTIONAL_PAGES,
    )
}

# -- example gallery -------------------------------------------------------------------------
GALLERY_OUTPUT = DOCS / "_build" / "gallery_output"


def _gallery_argv(gallery_conf, script_vars):
    """Command line of an executed example: its outputs go under the build directory.

    Sphinx-gallery runs every example with ``cwd = examples/`` and an empty ``argv``; an
    example that accepts ``--output-dir`` is pointed at ``docs/_build/gallery_output/<name>``
    so the build never writes into the source tree, and one that has a ``--quick`` preset runs
    it, so the gallery stays fast.
    """
    src = Path(script_vars["src_file"])
    text = src.read_text(encoding="utf-8")
    argv = ["--quick"] if '"--quick"' in text else []
    if "--output-dir" in text:
        # relative to the example's working directory (examples/): what an example prints
        # about its output then shows no absolute path of the machine that built the docs
        argv += ["--output-dir", os.path.relpath(GALLERY_OUTPUT / src.stem, src.parent)]
    return argv


#: Matplotlib settings of every executed example: no text below 10 pt in the figures.
GALLERY_RCPARAMS = {
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "figure.titlesize": 13,
}


def _reset_matplotlib(gallery_conf, fname):
    """Before each example: Matplotlib's defaults, then :data:`GALLERY_RCPARAMS`."""
    import matplotlib

    matplotlib.rcdefaults()
    matplotlib.rcParams.update(GALLERY_RCPARAMS)


sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    # Executed: examples/plot_*.py only (each must finish in seconds with its defaults). Every
    # other example is rendered (code and text) without running.
    "filename_pattern": re.escape(os.sep) + r"plot_",
    "ignore_pattern": r"__init__\.py|" + re.escape(os.sep) + r"_",
    "plot_gallery": os.environ.get("SKFLOW_DOCS_PLOT_GALLERY", "True"),
    "reset_argv": _gallery_argv,
    "reset_modules": (_reset_matplotlib, "seaborn"),
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "min_reported_time": 2,
    "show_memory": False,
    "show_signature": False,
    # No sg_execution_times.rst in the source tree; build.sh reports the total time.
    "write_computation_times": False,
}

# -- toctree entries that other pages provide --------------------------------------------------


def _drop_missing_pages(app, docname, source):
    if docname != root_doc:
        return
    missing = [
        page
        for page in OPTIONAL_PAGES
        if not any((DOCS / f"{page}{ext}").exists() for ext in (".md", ".rst"))
    ]
    if missing:
        alternatives = "|".join(map(re.escape, missing))
        pattern = re.compile(rf"^\s+({alternatives})\s*$", re.M)
        source[0] = pattern.sub("", source[0])


def _check_api_complete(app, exception):
    """Every public name of every documented module must have produced a page."""
    if exception is not None or app.builder.name != "html":
        return
    from sphinx.util import logging

    logger = logging.getLogger("skflow.docs")
    out = Path(app.outdir)
    for modname, entries in API_INDEX.items():
        for name, canonical in entries:
            target = canonical or f"{modname}.{name}"
            if not (out / "generated" / "reference" / f"{target}.html").exists():
                logger.warning("API reference: no page for %s (public in %s)", target, modname)


def setup(app):
    app.connect("source-read", _drop_missing_pages)
    app.connect("build-finished", _check_api_complete)
