"""A code cell as Python statements, skipping only the statements that are not valid Python.

A learner's cell that ends in an unfinished line (``dC =``, ``dhpreact = db2 *``) runs nothing in
Jupyter, yet every line above it is an answer the learner wrote and checked. The lecture-format
reader reads those: when a cell as a whole is not valid Python, it is cut into its top-level
statements (a ``for`` loop or an ``if`` block with its body and its ``else``, a decorated ``def``
whole), found by :mod:`tokenize`, and each is parsed on its own. A statement that is not valid
Python is skipped whole and named, never cut inside, so nothing is read that the learner did not
write as one statement, and line numbers stay the cell's. Before any parse, in either format,
IPython's own lines (magics, shell lines) are blanked by :func:`without_magics`.
"""

from __future__ import annotations

import ast
import io
import tokenize

MAGIC_PREFIXES = ("%", "!", "?")
"""IPython lines that are not Python (``%matplotlib inline``, ``!pip install``, ``?torch.sum``)."""


def without_magics(text: str, cell_magics: bool = True) -> str:
    """The cell's text with IPython-only lines blanked, line numbers kept: Jupyter runs them
    apart from the Python around them. With ``cell_magics`` False a ``%%time`` line stays (it
    decides how the whole cell runs, so the cell is not Python: a kit answer cell so written
    fails as it is; the lecture's reader only looks for statements, and takes them either way)."""
    return "\n".join(
        ""
        if line.lstrip().startswith(MAGIC_PREFIXES)
        and (cell_magics or not line.lstrip().startswith("%%"))
        else line
        for line in text.split("\n")
    )


CONTINUATIONS = frozenset({"else", "elif", "except", "finally"})
"""Keywords that carry on the compound statement above them at the cell's left margin."""

SKIPPED_ONLY = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)


def parse_cell(text: str) -> tuple[ast.Module, list[tuple[int, int]]]:
    """The cell's statements, and the first and last line of each top-level statement skipped
    because it is not valid Python (none when the cell parses as a whole). Raises what
    :func:`ast.parse` raises for code too deep or too odd to parse (RecursionError, MemoryError,
    ValueError), as for a cell that parses."""
    try:
        return ast.parse(text), []
    except SyntaxError:
        pass
    lines = text.split("\n")
    body: list[ast.stmt] = []
    skipped: list[tuple[int, int]] = []
    for first, last in pieces(text):
        try:
            piece = ast.parse("\n".join(lines[first - 1 : last]))
        except SyntaxError:
            skipped.append((first, _last_code_line(lines, first, last)))
            continue
        body.extend(ast.increment_lineno(piece, first - 1).body)  # the cell's numbering
    return ast.Module(body=body, type_ignores=[]), skipped


def pieces(text: str) -> list[tuple[int, int]]:
    """The first and last line of each top-level statement: each starts with a logical line at
    the left margin that neither carries on a compound statement (``else:``) nor follows a
    decorator. Where :mod:`tokenize` gives up (an unclosed bracket or string), the rest of the
    cell is one piece."""
    starts: list[int] = []
    line_start = True
    after_decorator = False
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NEWLINE:
                line_start = True
                continue
            if tok.type in SKIPPED_ONLY or tok.type == tokenize.ENDMARKER or not line_start:
                continue
            line_start = False
            margin = tok.start[1] == 0
            carries_on = tok.type == tokenize.NAME and tok.string in CONTINUATIONS
            if margin and not carries_on and not after_decorator:
                starts.append(tok.start[0])
            after_decorator = margin and tok.type == tokenize.OP and tok.string == "@"
    except (tokenize.TokenError, SyntaxError):  # IndentationError is one
        pass
    total = len(text.split("\n"))
    if not starts or starts[0] != 1:
        starts.insert(0, 1)
    ends = [s - 1 for s in starts[1:]] + [total]
    return list(zip(starts, ends, strict=True))


def _last_code_line(lines: list[str], first: int, last: int) -> int:
    """The last line of ``first``..``last`` holding more than blanks or a comment."""
    for number in range(last, first, -1):
        text = lines[number - 1].strip()
        if text and not text.startswith("#"):
            return number
    return first
