"""Entry for the course's ``nbgrader_config.py``: the kit's autograde preprocessor (see
:mod:`autograder.integrations.nbgrader_grade`)."""

from .integrations.nbgrader_grade import RESULT_MIME, GradeWithKit

__all__ = ["RESULT_MIME", "GradeWithKit"]
