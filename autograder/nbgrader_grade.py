"""Entry for the course's ``nbgrader_config.py``: the kit's autograde preprocessors (see
:mod:`autograder.integrations.nbgrader_grade`)."""

from .integrations.nbgrader_grade import RESULT_MIME, GradeWithKit, RestoreReleasedCells

__all__ = ["RESULT_MIME", "GradeWithKit", "RestoreReleasedCells"]
