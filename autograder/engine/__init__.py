"""The grader: what turns notebooks into results, above everything it drives.

:class:`~autograder.engine.grader.Grader` reads submissions (:mod:`autograder.grading`), runs each
distinct answer in sandboxes (:mod:`autograder.sandbox`), compares what comes back with the
references of the hidden cases (:mod:`autograder.core`) and explains failures
(:mod:`autograder.diagnoses`). Every front end (the CLI, nbgrader's preprocessor, the in-cell
hidden tests, the pytest plugin, Gradescope's runner) grades through it.
"""
