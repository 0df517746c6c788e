"""nbgrader configuration of the backprop-ninja course (this folder is the course root).

    nbgrader generate_assignment backprop_ninja --force   # source/ -> exercises/
    nbgrader generate_solution backprop_ninja --force     # source/ -> solutions/

`backprop-ninja build` regenerates source/ from the step catalog and runs both commands.
"""

from nbgrader.preprocessors import (
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    IncludeHeaderFooter,
    LockCells,
)

c = get_config()  # noqa: F821 (nbgrader defines get_config when it loads this file)

c.CourseDirectory.course_id = "backprop-ninja"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.solution_directory = "solutions"

# The solution notebook keeps the model answers and the visible checks, but not the hidden tests
# (they call the grading kit, which a student's machine does not have) and no outputs, so it is
# the same on every machine. nbgrader's default list ends with Execute instead.
c.GenerateSolution.preprocessors = [
    IncludeHeaderFooter,
    LockCells,
    ClearOutput,
    ClearMarkScheme,
    ClearHiddenTests,
]
