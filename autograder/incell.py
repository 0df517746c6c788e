"""Entry for the hidden tests of the source notebooks: ``from autograder.incell import
check_step`` (see :mod:`autograder.integrations.incell`)."""

from .integrations.incell import check_step

__all__ = ["check_step"]
