"""The kit's exercises, each a value (:class:`~autograder.exercises.definition.Exercise`).

``EXERCISES`` maps an nbgrader assignment id to its exercise; everything that grades, builds or
reports takes one of them. Adding an exercise means writing a module like
:mod:`autograder.exercises.backprop_ninja` and listing its value here.
"""

from __future__ import annotations

from .backprop_ninja import EXERCISE as BACKPROP_NINJA
from .batchnorm_backward import EXERCISE as BATCHNORM_BACKWARD
from .cross_entropy_backward import EXERCISE as CROSS_ENTROPY_BACKWARD
from .definition import ROOT, CaseSpec, Config, Exercise, Line, Scatter, Step, Term, Text
from .manual_training import EXERCISE as MANUAL_TRAINING

EXERCISES: dict[str, Exercise] = {
    e.id: e
    for e in (BACKPROP_NINJA, CROSS_ENTROPY_BACKWARD, BATCHNORM_BACKWARD, MANUAL_TRAINING)
}
"""Every exercise of the kit, by assignment id, in the lecture's order."""

DEFAULT = BACKPROP_NINJA
"""The exercise a notebook is taken for when nothing says otherwise (Exercise 1)."""


def get(exercise_id: str) -> Exercise:
    """The exercise with this assignment id; KeyError naming the known ids otherwise."""
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        known = ", ".join(EXERCISES)
        raise KeyError(f"no exercise {exercise_id!r}; the kit has: {known}") from None


__all__ = [
    "DEFAULT",
    "EXERCISES",
    "ROOT",
    "CaseSpec",
    "Config",
    "Exercise",
    "Line",
    "Scatter",
    "Step",
    "Term",
    "Text",
    "get",
]
