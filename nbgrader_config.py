"""nbgrader configuration of the backprop-ninja course (this folder is the course root).

    nbgrader generate_assignment backprop_ninja --force   # source/ -> exercises/
    nbgrader generate_solution backprop_ninja --force     # source/ -> solutions/

`backprop-ninja build` regenerates source/ from the exercises and runs both commands.

    nbgrader autograde backprop_ninja                     # submitted/ -> autograded/, gradebook
    nbgrader generate_feedback backprop_ninja             # autograded/ -> feedback/

(nbgrader runs the `alembic` script for its gradebook: activate the environment first.)
"""

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ComputeChecksums,
    DeduplicateIds,
    GetGrades,
    IgnorePattern,
    IncludeHeaderFooter,
    InstantiateTests,
    LimitOutput,
    LockCells,
    OverwriteKernelspec,
    SaveAutoGrades,
    SaveCells,
)

from autograder.course.stubs import StepStubs
from autograder.nbgrader_feedback import (
    EmbedKitFeedback,
    FeedbackExporter,
    HideTestCode,
    NameSteps,
    SanitizeOutputs,
)
from autograder.nbgrader_grade import GradeWithKit, RestoreReleasedCells

c = get_config()  # noqa: F821 (nbgrader defines get_config when it loads this file)

c.CourseDirectory.course_id = "backprop-ninja"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.solution_directory = "solutions"

# The released notebook: nbgrader's list with the kit's StepStubs in place of ClearSolutions, so
# an unanswered cell says which step it is ("dlogprobs: replace this line with your code").
# ComputeChecksums and SaveCells come before ClearHiddenTests on purpose: the gradebook keeps the
# grade cells with their hidden tests, which autograde puts back (see RestoreReleasedCells).
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

# Autograde, first step: nbgrader's sanitizing list with RestoreReleasedCells in place of
# OverwriteCells. Both put every locked cell back from the gradebook, hidden tests included;
# OverwriteCells also warns "Attribute 'checksum' for cell test_... has changed!" for every
# untouched grade cell (nbgrader issue #1961: the gradebook's checksum covers the hidden tests,
# which the released cell lacks), while RestoreReleasedCells warns only for a cell really changed.
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    RestoreReleasedCells,
    CheckCellMetadata,
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

# Feedback: no hidden test code (nbgrader shows it by default), each step's title in the header
# (nbgrader's says "Test cell" 26 times), every output of the submission sanitized before the
# kit's page goes on top, and every markdown cell sanitized by the exporter: a student's
# <img onerror=...> or <script> never runs in the page. (nbconvert's HTMLExporter.sanitize_html
# would not do it: nbgrader's feedback template renders markdown without it.)
c.GenerateFeedback.exporter_class = FeedbackExporter
c.GenerateFeedback.preprocessors = [
    GetGrades,
    HideTestCode,
    NameSteps,
    SanitizeOutputs,
    EmbedKitFeedback,
    CSSHTMLHeaderPreprocessor,
]
