"""Entry for the course's ``nbgrader_config.py``: the kit's feedback preprocessors and exporter
(see :mod:`autograder.integrations.nbgrader_feedback`)."""

from .integrations.nbgrader_feedback import (
    EmbedKitFeedback,
    FeedbackExporter,
    HideTestCode,
    NameSteps,
    SanitizeOutputs,
    clean_html,
)

__all__ = [
    "EmbedKitFeedback",
    "FeedbackExporter",
    "HideTestCode",
    "NameSteps",
    "SanitizeOutputs",
    "clean_html",
]
