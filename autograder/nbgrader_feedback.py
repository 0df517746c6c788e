"""Entry for the course's ``nbgrader_config.py``: the kit's feedback preprocessors (see
:mod:`autograder.integrations.nbgrader_feedback`)."""

from .integrations.nbgrader_feedback import EmbedKitFeedback, HideTestCode

__all__ = ["EmbedKitFeedback", "HideTestCode"]
