"""backprop-ninja: an autograded exercise kit for manual backpropagation (makemore part 4, ex. 1).

Modules: ``catalog`` (the 26 steps, as data), ``model`` (the MLP and its forward pass),
``dataset`` (names.txt -> contexts), ``references`` (float64 local vector-Jacobian products),
``cases`` (the hidden configurations), ``sandbox`` (worker processes for student code),
``engine`` (grading), ``diagnose`` (what went wrong, in words), ``cli`` and ``pytest_plugin``.
"""

__version__ = "0.1.0"
