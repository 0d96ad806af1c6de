#!/usr/bin/env bash
# Build the HTML documentation with warnings as errors:  bash docs/build.sh [extra sphinx args]
# Needs the docs extra and an importable skflow (pip install -e ".[docs]"). Works offline.
# Output: docs/_build/html/index.html. Environment:
#   SKFLOW_DOCS_PLOT_GALLERY=False  render the gallery without executing any example
#   SKFLOW_DOCS_ONLINE=1            use the live intersphinx inventories (needs the network)
#   PYTHON=.venv/bin/python         the interpreter to build with (default: python)
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python}
tools="sphinx, numpydoc, pydata_sphinx_theme, sphinx_gallery, myst_parser"
if ! "$python" -c "import $tools" 2>/dev/null; then
    echo "docs/build.sh: missing documentation tools; run: pip install -e \".[docs]\"" >&2
    exit 1
fi

# Start clean: generated pages and gallery output are rebuilt from the sources every time.
rm -rf docs/_build docs/generated docs/auto_examples

start=$(date +%s)
MPLBACKEND=Agg "$python" -m sphinx -W --keep-going -b html docs docs/_build/html "$@"
echo "docs/build.sh: built docs/_build/html in $(( $(date +%s) - start )) s"
