"""The training run that grades a ``training`` step (Exercise 4): built from the student's cells.

The program is the exercise's forward pass, every gradient answer of the submission in order and
the update cell, run for :data:`~autograder.core.portable.TRAINING_STEPS` batches from the
case's initial parameters; the answer it produces is the loss before each update. The reference
is the same run with autograd's gradients (:func:`~autograder.core.portable.autograd_training`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..exercises.definition import Exercise, Step
from .portable import training_program


def gradient_steps(ex: Exercise) -> list[Step]:
    """The steps whose answers the training run calls, in the exercise's order."""
    return [s for s in ex.steps if s.kind == "gradient"]


def program(ex: Exercise, step: Step, answers: Mapping[str, str]) -> str:
    """The training run of a submission (``answers`` by step name; a missing one runs as a line
    that raises, so the run stops with a reason)."""
    cells = [
        answers.get(s.name, f'raise RuntimeError("the cell of {s.name} is missing")')
        for s in gradient_steps(ex)
    ]
    update = answers.get(step.name, f'raise RuntimeError("the cell of {step.name} is missing")')
    gradients = ["d" + p for p in ex.parameters]
    return training_program(ex.pass_lines, cells, update, ex.parameters, gradients, step.name)
