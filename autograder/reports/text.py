"""The kit's verdicts as text, formatted in one place for every front end.

The CLI's tables, the pytest suite's failure messages, the notebook's hidden tests, nbgrader's
grade cells and Gradescope's test output all say a step's verdict and diagnoses in these words.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

from ..exercises import Exercise
from ..grading.results import CaseResult, Diagnosis, StepResult

WRAP = 96
"""Width of the diagnoses in a grade cell's text (notebooks and feedback do not wrap outputs)."""


_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
"""Characters a terminal acts on or cannot encode: C0 and C1 controls but tab and newline
(escape sequences, carriage returns), lone surrogates, bidirectional overrides."""


def printable(text: str) -> str:
    """``text`` safe to print: a student's error message or file name may carry escape
    sequences (which retitle or clear the grader's terminal) or lone surrogates (which stop
    the output); each such character is shown as its escape, ``\\x1b`` or ``\\ud800``."""

    def shown(m: re.Match[str]) -> str:
        c = ord(m.group())
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"

    return _UNPRINTABLE.sub(shown, text)


def diagnosis_text(d: Diagnosis) -> str:
    """``[code] message``, printable."""
    return printable(f"[{d.code}] {d.message}")


def diagnoses_text(diagnoses: Iterable[Diagnosis], sep: str = " ") -> str:
    """Every diagnosis of a step, ``[code] message`` each."""
    return sep.join(diagnosis_text(d) for d in diagnoses)


def failure_text(result: StepResult) -> str:
    """Why a step failed, in one paragraph (the diagnoses, or a plain sentence)."""
    return diagnoses_text(result.diagnoses) or f"{result.step} is not correct"


def verdict_line(result: StepResult, seed: int) -> str:
    """``dcounts: failed (0/1, hidden cases, seed 123)``."""
    verdict = "passed" if result.passed else "failed"
    return (
        f"{result.step}: {verdict} ({result.score:g}/{result.max_score:g}, hidden cases, "
        f"seed {seed})"
    )


def verdict_text(result: StepResult, seed: int, width: int = WRAP) -> str:
    """The verdict line, then one wrapped line per diagnosis (a grade cell's output)."""
    lines = [verdict_line(result, seed)]
    lines += [
        textwrap.fill(diagnosis_text(d), width=width, subsequent_indent="  ")
        for d in result.diagnoses
    ]
    if not result.passed and not result.diagnoses:
        lines.append(f"{result.step} is not correct.")
    return "\n".join(lines) + "\n"


UNSTARTED = "not-implemented"
"""The diagnosis of an answer cell left as released: not a mistake, the step is not started."""
MISSING = "missing-cell"
"""The diagnosis of a step whose answer cell was not found in the notebook."""


def step_state(result: StepResult) -> str:
    """``pass``, ``wrong`` (a real mistake), ``unstarted`` (the cell is as released) or
    ``missing`` (no answer cell): the reports show the last two apart from mistakes."""
    if result.passed:
        return "pass"
    codes = {d.code for d in result.diagnoses}
    if codes == {UNSTARTED}:
        return "unstarted"
    if codes == {MISSING}:
        return "missing"
    return "wrong"


STATUS_WORDS = {
    "wrong-value": "wrong values",
    "shape-mismatch": "wrong shape",
    "error": "raised an error",
    "not-a-tensor": "not a tensor",
    "number": "a number, not a tensor",
    "other": "not a tensor",
    "missing": "the gradient was not assigned",
    "too-large": "too large to compare",
    "not-implemented": "not implemented",
    "no-result": "no result",
}
"""A failed configuration's status (:class:`~autograder.grading.results.CaseResult`) in words."""


def case_words(ex: Exercise, case: str) -> str:
    """What a hidden configuration is, in an instructor's words (its name if unknown)."""
    for spec in ex.cases:
        if spec.name == case:
            return spec.words
    return case


def case_failure(c: CaseResult) -> str:
    """Why one configuration failed: ``wrong values (largest difference 0.31, allowed 2e-05)``."""
    words = STATUS_WORDS.get(c.status, c.status.replace("-", " "))
    if c.status == "wrong-value" and c.maxdiff is not None:
        allowed = f", allowed {c.tolerance:.1g}" if c.tolerance is not None else ""
        return f"{words} (largest difference {c.maxdiff:.3g}{allowed})"
    if c.status == "wrong-value":  # nan or inf somewhere
        return f"{words} (not finite: nan or inf)"
    return words


def shape_fact(result: StepResult) -> str | None:
    """``your shape (64,), expected (1, 64)`` when the answer's shape is wrong, else None."""
    if result.shape is None or list(result.shape) == list(result.expected_shape):
        return None
    return f"your shape {tuple(result.shape)}, expected {tuple(result.expected_shape)}"


def case_facts(ex: Exercise, result: StepResult) -> list[tuple[str, str, str]]:
    """``(configuration, what it is, why it failed)`` for each hidden configuration a failed
    step failed; one ``("every configuration", "", why)`` when all failed the same way."""
    failed = [c for c in result.cases if not c.passed]
    whys = [case_failure(c) for c in failed]
    if len(failed) > 1 and len(failed) == len(result.cases) and len(set(whys)) == 1:
        return [(f"every configuration ({len(failed)})", "", whys[0])]
    return [(c.case, case_words(ex, c.case), why) for c, why in zip(failed, whys, strict=True)]


def failure_facts(ex: Exercise, result: StepResult) -> list[str]:
    """What failed in a failed step, one line each: the shape got against the one expected,
    then every failed configuration with what it is and why (no line for a passed step)."""
    if result.passed:
        return []
    facts = [f] if (f := shape_fact(result)) else []
    for name, words, why in case_facts(ex, result):
        facts.append(f"{name} ({words}): {why}" if words else f"{name}: {why}")
    return facts
