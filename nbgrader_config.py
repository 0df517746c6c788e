"""nbgrader configuration of the backprop-ninja course (this folder is the course root).

    nbgrader generate_assignment backprop_ninja --force   # source/ -> exercises/
    nbgrader generate_solution backprop_ninja --force     # source/ -> solutions/

`backprop-ninja build` regenerates source/ from the exercises and runs both commands.

    nbgrader autograde backprop_ninja                     # submitted/ -> autograded/, gradebook
    nbgrader generate_feedback backprop_ninja             # autograded/ -> feedback/
"""

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ComputeChecksums,
    GetGrades,
    IgnorePattern,
    IncludeHeaderFooter,
    InstantiateTests,
    LimitOutput,
    LockCells,
    SaveAutoGrades,
    SaveCells,
)

from autograder.course.stubs import StepStubs
from autograder.nbgrader_feedback import EmbedKitFeedback, HideTestCode
from autograder.nbgrader_grade import GradeWithKit

c = get_config()  # noqa: F821 (nbgrader defines get_config when it loads this file)

c.CourseDirectory.course_id = "backprop-ninja"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.solution_directory = "solutions"

# The released notebook: nbgrader's list with the kit's StepStubs in place of ClearSolutions, so
# an unanswered cell says which step it is ("dlogprobs: replace this line with your code").
c.GenerateAssignment.preprocessors = [
    IncludeHeaderFooter,
    InstantiateTests,
    LockCells,
    StepStubs,
    ClearOutput,
    CheckCellMetadata,
    ComputeChecksums,
    SaveCells,
    ClearHiddenTests,
    ClearMarkScheme,
    ComputeChecksums,
    CheckCellMetadata,
]

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

# Autograde: nbgrader's own list with the kit's GradeWithKit in place of Execute. No kernel is
# started: each answer cell runs only in the kit's sandboxed workers, and each grade cell gets the
# step's verdict and diagnoses as text and its points as the partial credit. Options:
# c.GradeWithKit.seed (default: $BACKPROP_NINJA_SEED, else drawn per run), .timeout, .jobs,
# .sandbox.
c.Autograde.autograde_preprocessors = [
    GradeWithKit,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]

# Feedback: no hidden test code (nbgrader shows it by default), and the kit's feedback page on top.
c.GenerateFeedback.preprocessors = [
    GetGrades,
    HideTestCode,
    EmbedKitFeedback,
    CSSHTMLHeaderPreprocessor,
]
