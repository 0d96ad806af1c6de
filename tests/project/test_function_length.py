"""No function of ``skflow/`` is longer than 80 lines of code (the research bench,
``skflow_experiments/``, is not held to it).

Lines of code are the non-blank lines of a function's body that are not comments, excluding
its docstring. The test walks the AST of every module and prints the offenders.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "skflow"
MAX_LINES = 80


def _code_lines(source: str) -> set[int]:
    """Line numbers that hold a token other than a comment, newline or indentation."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip and tok.type != tokenize.ENDMARKER:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, lines of code)`` of every function in ``source``."""
    code = _code_lines(source)
    out: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                body = child.body
                doc = ast.get_docstring(child, clean=False) is not None
                lines = set(range(child.lineno, child.end_lineno + 1)) & code
                if doc:
                    lines -= set(range(body[0].lineno, body[0].end_lineno + 1))
                out.append((f"{prefix}{child.name}", child.lineno, len(lines)))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def test_counter_skips_docstring_comments_and_blank_lines():
    source = 'def f(x):\n    """Doc.\n\n    More.\n    """\n    # why\n\n    y = x\n    return y\n'
    assert function_lengths(source) == [("f", 1, 3)]


def test_no_function_is_longer_than_80_lines():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        for name, line, n in function_lengths(path.read_text()):
            if n > MAX_LINES:
                offenders.append(f"{path.relative_to(ROOT.parent)}:{line} {name}: {n} lines")
    print("\n".join(offenders))
    assert not offenders, "functions longer than 80 lines of code:\n" + "\n".join(offenders)
