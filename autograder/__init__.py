"""backprop-ninja: an autograded exercise kit for manual backpropagation (makemore part 4).

The package, by layer (each imports only from the layers above it in this list):

- ``exercises``: each exercise as a value: its forward pass, steps, texts, configurations;
- ``core``: the math: the model, float64 references, the hidden cases (``portable`` is the part
  the notebooks carry too);
- ``sandbox``: where answers run: the launcher, the runner inside, the pool of sandboxes;
- ``grading``: reading submissions, running them in sandboxes, judging the answers, results;
- ``diagnoses``: what a wrong answer did, in words;
- ``reports``: text verdicts, HTML pages and figures;
- ``course``: the notebooks, built from the exercises with nbgrader; ``dataset``: names.txt;
- ``integrations``: nbgrader's preprocessors, the in-notebook hidden tests, Gradescope;
- ``cli``: the ``backprop-ninja`` command.

The top-level modules ``incell``, ``nbgrader_grade``, ``nbgrader_feedback``, ``pytest_plugin``
and ``test_submission`` are the thin entries that notebooks, nbgrader and pytest import.
"""

__version__ = "0.2.0"
