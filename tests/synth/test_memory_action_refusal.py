"""synth's engines time forwards and backwards only (issue 18): a schedule with memory actions is refused with a
diagnostic, never timed wrongly or crashed on."""

from __future__ import annotations

import pytest

import ppdsl
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.synth.problem import problem_from_expansion


def test_a_problem_from_a_schedule_with_memory_actions_is_refused():
    exp = ppdsl.expand("1f1b_recompute", pp=2, microbatches=2)
    with pytest.raises(DiagnosticError) as err:
        problem_from_expansion(exp, "looped", "auto")
    (found,) = err.value.diagnostics
    assert found.code == "E083" and "synth does not search them yet" in found.message


def test_a_problem_from_a_plain_schedule_is_still_made():
    assert problem_from_expansion(ppdsl.expand("1f1b", pp=2, microbatches=2), "looped", "auto").pp == 2
