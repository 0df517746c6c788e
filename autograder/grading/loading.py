"""A notebook file to the submissions it holds: the kit's own format or the lecture's.

:mod:`autograder.grading.submission` reads a kit notebook (answers by grade id) and defines what
a submission is; :mod:`autograder.grading.lecture` reads a notebook in the lecture's own format
and builds on it. This module sits above both and hands each notebook to the right one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..exercises.definition import Exercise
from .lecture import STUB, not_answered, read_lecture
from .lecture_code import TooMuchCode
from .submission import (
    METADATA_KEY,
    Submission,
    SubmissionError,
    exercise_of,
    extract_answers,
    read_notebook,
)


class WrongExercise(SubmissionError):
    """A notebook whose metadata names another exercise than the one being graded."""


def load_submissions(path: Path) -> list[Submission]:
    """Read ``path`` and extract its answers: one submission for a kit notebook; for a notebook
    in the lecture's own format (no grade id names a step, and it holds the lecture's forward
    pass), Exercise 1's and then one for each other exercise it answers (see
    :mod:`autograder.grading.lecture`). Raises SubmissionError if it is not a notebook, or is
    one whose structure the readers cannot follow (a hostile or corrupt file costs its own
    result, never the batch)."""
    return _guarded(path)[1]


def load_assignment(path: Path, ex: Exercise) -> Submission:
    """The submission of exercise ``ex`` in the notebook at ``path``, for a class that hands in
    one exercise: a kit notebook is read as ``ex``, a lecture notebook gives its answers to
    ``ex`` (or, holding none, a reason for every step, in the lecture's terms). Raises
    :class:`WrongExercise` for a kit notebook whose metadata names another exercise (the student
    handed in another notebook), SubmissionError as :func:`load_submissions` does."""
    nb, subs = _guarded(path)
    declared = exercise_of(nb)
    meta = nb.get("metadata")
    in_metadata = isinstance(meta, dict) and isinstance(meta.get(METADATA_KEY), dict)
    if declared is not None and declared.id != ex.id and in_metadata:
        raise WrongExercise(
            f"This notebook is {declared.text.title} ({declared.id}), but this assignment is "
            f"{ex.text.title} ({ex.id}): submit your {ex.id}.ipynb."
        )
    ours = [s for s in subs if s.exercise.id == ex.id]
    if ours:
        return ours[0]
    if subs and subs[0].format == "lecture":
        why = not_answered(ex)
        sub = Submission(path=path, exercise=ex, format="lecture", error=why)
        for step in ex.steps:  # each step says so in short, the notebook's error in full
            sub.answers[step.name] = STUB
            sub.problems[step.name] = f"it is in the lecture's format and answers no `{ex.id}`"
        return sub
    return extract_answers(nb, path, ex)


def _guarded(path: Path) -> tuple[dict[str, Any], list[Submission]]:
    try:
        return _load_submissions(path)
    except SubmissionError:
        raise
    except Exception as e:
        raise SubmissionError(
            f"the notebook's structure could not be read ({type(e).__name__}); "
            "open it in Jupyter, save it again and resubmit"
        ) from None


def _load_submissions(path: Path) -> tuple[dict[str, Any], list[Submission]]:
    nb = read_notebook(path)
    if exercise_of(nb) is None:
        try:
            found = read_lecture(nb, path)
        except TooMuchCode as e:
            raise SubmissionError(
                f"the notebook holds {e} (more than an answered lecture notebook ever does): "
                "hand in the notebook with the exercise's cells only"
            ) from None
        except (RecursionError, MemoryError, ValueError) as e:  # code too deep or too odd
            raise SubmissionError(
                f"the notebook's code could not be followed ({type(e).__name__}); "
                "simplify its most deeply nested expressions"
            ) from None
        if found:
            return nb, found
        sub = extract_answers(nb, path)
        if not sub.answers:
            sub.error = UNRECOGNISED
        return nb, [sub]
    return nb, [extract_answers(nb, path)]


UNRECOGNISED = (
    "this is not a notebook of the exercise: no cell has a grade id naming a step (the kit's "
    "notebooks), and the lecture's forward pass (`emb = C[Xb]` ... `loss = -logprobs[range(n), "
    "Yb].mean()`) was not found (the lecture's own notebook); submit the notebook you answered in"
)
"""The reason given for a notebook in neither format."""


def load_submission(path: Path) -> Submission:
    """The first of :func:`load_submissions` (for a lecture notebook, its Exercise 1)."""
    return load_submissions(path)[0]
