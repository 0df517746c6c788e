"""Every correct chain-rule answer passes however it is spelled; wrong ones fail, per step.

For each of the 26 steps: at least two correct spellings other than the model answer pass, and
at least two wrong answers fail (the corpus in :mod:`tests.corpus`, graded by the real engine in
one batch). Also the cases that only the hidden configurations catch: sign errors and missing
branches where the true gradient is ~0 (dlogit_maxes, db1), and ``dC[Xb] += demb``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autograder.exercises import DEFAULT
from autograder.grading.results import StepResult

from .corpus import RIGHT, WRONG

NAMES = [s.name for s in DEFAULT.steps]
Grade = Callable[[str, str], StepResult]


@pytest.mark.parametrize("name", NAMES)
def test_at_least_two_correct_spellings_pass(name: str, grade: Grade) -> None:
    answers = [a for a in RIGHT if a.step == name]
    assert len(answers) >= 2
    for a in answers:
        r = grade(a.step, a.code)
        assert r.passed and r.score == r.max_score, (a.code, [d.message for d in r.diagnoses])
        assert all(c.passed for c in r.cases)


@pytest.mark.parametrize("name", NAMES)
def test_at_least_two_wrong_answers_fail(name: str, grade: Grade) -> None:
    answers = [a for a in WRONG if a.step == name]
    assert len(answers) >= 2
    for a in answers:
        r = grade(a.step, a.code)
        assert not r.passed and r.score == 0, a.code
        assert r.diagnoses, a.code


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("dlogit_maxes", "dlogit_maxes = dnorm_logits.sum(1, keepdim=True)"),
        ("dlogit_maxes", "dlogit_maxes = torch.zeros_like(logit_maxes)"),
        ("db1", "db1 = -dhprebn.sum(0)"),
        ("db1", "db1 = torch.zeros_like(b1)"),
        ("dlogits", "dlogits = dnorm_logits.clone()"),
    ],
)
def test_slips_invisible_at_the_true_gradient_are_caught(
    name: str, code: str, grade: Grade
) -> None:
    r = grade(name, code)
    assert r.cases[0].case == "lecture" and r.cases[0].passed  # the true gradient hides it ...
    assert not r.passed  # ... the random upstream gradients do not


def test_dC_loop_index_add_one_hot_and_index_put_all_pass(grade: Grade) -> None:
    kinds = {"loop": "for ", "index_add_": "index_add_", "one-hot": "one_hot", "put": "index_put_"}
    for kind, marker in kinds.items():
        found = [a for a in RIGHT if a.step == "dC" and marker in a.code]
        assert found, kind
        assert all(grade(a.step, a.code).passed for a in found), kind


def test_fancy_index_scatter_is_caught_and_named(grade: Grade) -> None:
    r = grade("dC", "dC = torch.zeros_like(C)\ndC[Xb] += demb")
    assert not r.passed
    assert r.diagnoses[0].code == "scatter-drops-duplicates"
    assert r.rows is not None and r.rows.wrong and set(r.rows.wrong) <= set(r.rows.repeated)


@pytest.mark.parametrize(
    "code",
    [
        "dbnvar = (-0.5 * bnvar**-1.5) * dbnvar_inv",
        "dbnvar = (-0.5 * (bnvar - 1e-5)**-1.5) * dbnvar_inv",
    ],
)
def test_a_dropped_or_wrong_epsilon_fails_where_features_are_nearly_constant(
    code: str, grade: Grade
) -> None:
    r = grade("dbnvar", code)
    assert not r.passed
    failed = [c.case for c in r.cases if not c.passed]
    assert failed == ["near-constant"]
    assert "1e-5" in r.diagnoses[0].message
