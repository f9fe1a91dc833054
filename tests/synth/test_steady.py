"""A found schedule written in its steady state holds at more micro-batches: detected, written, proven."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

import ppdsl.synth.driver as synth
from ppdsl.analysis.check import check
from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.expand import expand
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.plan.kinds import BACKWARD, FORWARD, OPTIMIZER
from ppdsl.synth import SynthRequest, synthesize_file
from ppdsl.synth.steady import rank_steady, steady_form
from ppdsl.synth.writer import in_order

F, B = FORWARD, BACKWARD


def one_f_one_b(m: int, warmup: int) -> list[tuple[int, int]]:
    """One rank's 1F1B tokens (stage 0): warm-up forwards, then (F, B) pairs, then the remaining backwards."""
    return [(F, 0)] * warmup + [(F, 0), (B, 0)] * (m - warmup) + [(B, 0)] * warmup


def test_a_block_of_one_micro_batch_is_found_between_warm_up_and_cool_down():
    found = rank_steady(one_f_one_b(8, 3), stride=1)
    assert found is not None
    assert found.block == ((F, 0), (B, 0)) and found.repeats == 5
    assert found.warmup == ((F, 0),) * 3 and found.cooldown == ((B, 0),) * 3


def test_no_block_when_nothing_repeats_or_a_block_misses_a_type():
    assert rank_steady([(F, 0)] * 4 + [(B, 0)] * 4, stride=1) is None  # FThenB: no block holds both
    assert rank_steady([(F, 0), (B, 0), (B, 0), (F, 0)], stride=1) is None  # each pair only once


def test_a_stride_block_holds_each_type_stride_times():
    tokens = [(F, 0), (F, 0), (B, 0), (B, 0)] * 3
    assert rank_steady(tokens, stride=1) is None
    found = rank_steady(tokens, stride=2)
    assert found is not None and found.repeats == 3 and found.warmup == () and found.cooldown == ()


def synth_request(tmp_path: Path, pp: int, m: int, **options) -> SynthRequest:
    options.setdefault("time_limit", 1.0)
    return SynthRequest(pp, m, costs=CostSpec(), output=str(tmp_path / "s.sched"), **options)


def proven_range(text: str) -> tuple[int, int]:
    found = re.search(r"microbatches >= (\d+) and microbatches <= (\d+)", text)
    assert found, text
    return int(found[1]), int(found[2])


def check_file(path: Path, pp: int, m: int, vpp: int = 1):
    return check(Scenario(path, pp, m, vpp))


def test_synth_writes_the_steady_state_and_it_checks_at_every_count_it_admits(tmp_path: Path):
    outcome = synthesize_file(synth_request(tmp_path, 4, 8))
    path = tmp_path / "s.sched"
    path.write_text(outcome.text, encoding="utf-8")
    low, high = proven_range(outcome.text)
    assert low == 8 and high > 8
    assert re.search(r"repeat microbatches - \d+ \{|repeat microbatches \{", outcome.text)
    assert "Steady state:" in outcome.text
    at_m = check_file(path, 4, 8)
    assert at_m.valid and at_m.makespan == pytest.approx(outcome.result.makespan)
    for m in (9, 13, high):
        result = check_file(path, 4, m)
        assert result.valid, (m, [d.message for d in result.diagnostics])
        assert max(r.peak_activations for r in result.ranks) <= max(r.peak_activations for r in at_m.ranks) + 1e-9
    beyond = check_file(path, 4, high + 1)  # beyond what was proven: the require says so
    assert [d.code for d in beyond.diagnostics] == ["S100"]


def test_the_steady_form_at_another_count_is_the_block_repeated(tmp_path: Path):
    """What the file runs at m + 2 is the steady form's orders at m + 2: warm-up, more blocks, cool-down."""
    request = synth_request(tmp_path, 3, 6)
    outcome = synthesize_file(request)
    form = steady_form(outcome.result.problem, outcome.result.orders)
    assert form is not None and form.stride == 1
    path = tmp_path / "s.sched"
    path.write_text(outcome.text, encoding="utf-8")
    exp = expand(Scenario(path, 3, 8, 1).definition(), 3, 8)
    jobs = [[exp.job(r, code) for code in codes] for r, codes in enumerate(exp.jobs)]
    written = [[(job[0], job[1]) for job in rank if job[0] != OPTIMIZER] for rank in jobs]
    assert written == form.orders(8)


def test_a_schedule_without_a_steady_state_is_written_for_its_size_and_says_so(tmp_path: Path, monkeypatch):
    """When the checker refuses the steady form at the first count above (here made to), the file is the fixed
    size's, with a sentence saying why."""
    real = synth.checked_counts

    def refuse_above(text, request, result, counts):
        for count, checked in zip(counts, real(text, request, result, counts), strict=True):
            failed = [*checked.diagnostics, Diagnostic("S105", "made to fail")]
            yield replace(checked, diagnostics=failed) if count > request.microbatches else checked

    monkeypatch.setattr(synth, "checked_counts", refuse_above)
    outcome = synthesize_file(synth_request(tmp_path, 4, 8))
    assert "microbatches == 8" in outcome.text
    assert "For microbatches=8 only" in outcome.text
    assert "repeat microbatches" not in outcome.text


def test_periodic_and_table_forms_keep_their_requires(tmp_path: Path):
    periodic = synthesize_file(synth_request(tmp_path, 2, 4, periodic=True))
    assert "any number of micro-batches" in periodic.text and "microbatches >=" not in periodic.text
    assert in_order(periodic.result.orders) or "table {" in periodic.text
