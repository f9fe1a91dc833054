"""`ppdsl synth`: written schedules check valid, within the limit, with the searched makespan; the exact engine
agrees with brute force; determinism; bad input."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import ppdsl
from ppdsl.analysis.costs import CostSpec
from ppdsl.cli import app
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth import SynthRequest, synthesize_file
from ppdsl.synth.bounds import lower_bound
from ppdsl.synth.exact import solve
from ppdsl.synth.problem import build_problem
from ppdsl.synth.schedule import Evaluator, complete

from paths import ROOT

runner = CliRunner()
UNIFORM = {"forward": 1, "backward": 2, "backward_b": 1, "backward_w": 1}
HETERO = {"forward": 1, "backward": 2.2, "backward_b": 1.5, "backward_w": 0.7, "latency": 0.1}


def synth(*args: str):
    return runner.invoke(app, ["synth", *args])


def test_the_file_checks_with_the_makespan_the_search_reports(tmp_path):
    out = tmp_path / "s.sched"
    result = synth(
        "--pp", "4", "-m", "8", "--memory-limit", "4", "--time-limit", "2", "-o", str(out), "--format", "json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    check = ppdsl.check(out, pp=4, microbatches=8)
    assert check.valid
    assert check.makespan == report["makespan"]
    assert [r.peak_activations for r in check.ranks] == report["peak_activations"]
    assert max(report["peak_activations"]) <= 4
    # the file declares the limit, so the checker proves it too
    assert all(r.memory_limit == 4 for r in check.ranks)
    assert report["lower_bound"] <= report["makespan"]
    assert report["file"] == str(out)
    # F = I = W = 1 at 1F1B's memory: the zero-bubble lower bound (p - 1) * F + m * (F + I + W) is reachable
    assert report["makespan"] == 3 + 8 * 3 and report["optimal"] is True


def test_costs_latency_and_a_heavier_last_stage_are_honoured(tmp_path):
    costs = tmp_path / "costs.json"
    heavy = {name: value * 1.5 for name, value in UNIFORM.items()}
    costs.write_text(json.dumps({"unit": "s", "costs": UNIFORM, "stages": {"3": heavy}, "latency": 0.25}))
    out = tmp_path / "s.sched"
    args = ["--pp", "4", "-m", "6", "--costs", str(costs), "--memory-limit", "4", "--time-limit", "2", "-o", str(out)]
    result = synth(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    text = out.read_text()
    # (the writer's output is formatted: a run of `cost` declarations aligns its `=`)
    assert re.search(r"^cost forward +\= if stage == 3 then 1\.5 else 1$", text, re.M)
    assert re.search(r"^comm latency +\= 0\.25$", text, re.M)
    report = json.loads(result.stdout)
    plain = ppdsl.check(out, pp=4, microbatches=6)  # the costs are in the file
    with_file = ppdsl.check(out, pp=4, microbatches=6, costs=costs)  # and they agree with the cost file
    assert plain.makespan == with_file.makespan == report["makespan"]
    # the last stage's work bounds the makespan from below: 6 micro-batches of 1.5 * (F + I + W)
    assert report["makespan"] >= 3 * (1 + 0.25) + 6 * 1.5 * 3


def test_v_shape_with_two_chunks(tmp_path):
    out = tmp_path / "v.sched"
    result = synth("--pp", "2", "-m", "4", "--vpp", "2", "--placement", "vshape", "--memory-limit", "3",
                   "--time-limit", "2", "-o", str(out), "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    check = ppdsl.check(out, pp=2, microbatches=4, vpp=2)
    assert check.valid and check.expansion.defn.placement_kind == "vshape"
    assert max(r.peak_activations for r in check.ranks) <= 3
    assert check.makespan == json.loads(result.stdout)["makespan"]
    # `plot` draws it like any schedule, with the makespan the search found
    picture = tmp_path / "v.svg"
    drawn = runner.invoke(app, ["plot", str(out), "--pp", "2", "-m", "4", "--vpp", "2", "-o", str(picture)])
    assert drawn.exit_code == 0, drawn.output
    assert "<svg" in picture.read_text(encoding="utf-8") and picture.stat().st_size > 10_000
    assert f"makespan {check.makespan:g}" in drawn.stdout


def test_same_inputs_same_file(tmp_path):
    texts = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.sched"
        args = ["--pp", "3", "-m", "6", "--memory-limit", "2.5", "--cost", "backward_b=1.5,backward_w=0.7,latency=0.1"]
        result = synth(*args, "--time-limit", "1", "-o", str(out))
        assert result.exit_code == 0, result.output
        texts.append(out.read_text().replace(str(out), "OUT"))
    assert texts[0] == texts[1]


def test_dash_writes_the_schedule_to_stdout():
    result = synth("--pp", "2", "-m", "2", "--time-limit", "1", "-o", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith('"""Synthesized by `ppdsl synth`')
    assert "order {" in result.stdout or "table {" in result.stdout
    assert "wrote stdout" in result.stdout


def test_a_limit_below_what_any_schedule_needs_is_refused(tmp_path):
    out = tmp_path / "s.sched"
    result = synth(
        "--pp", "4", "-m", "8", "--vpp", "2", "--placement", "vshape", "--memory-limit", "1.5", "-o", str(out)
    )
    assert result.exit_code == 1
    assert "error[S114]" in result.stderr and "rank" in result.stderr and "at least 2" in result.stderr
    assert "Traceback" not in result.output
    assert not out.exists(), "nothing is written when nothing fits"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pp", "4", "-m", "8", "--vpp", "3", "--placement", "vshape"], "even number of chunks"),
        (["--pp", "0", "-m", "8"], "`--pp` must be an integer from 1 to 1048576, got 0"),
        (["--pp", "2", "-m", "4", "--memory-limit", "lots"], "bad memory size"),
        (["--pp", "2", "-m", "4", "--cost", "fwd=1"], "names no job type `fwd`"),
        (["--pp", "2", "-m", "4", "--time-limit", "0"], "`--time-limit` must be a number from 0.01 to 1000000, got 0"),
        (
            ["--pp", "2", "-m", "4", "--time-limit", "nan"],
            "`--time-limit` must be a number from 0.01 to 1000000, got nan",
        ),
        (["--pp", "2", "-m", "4", "--workers", "0"], "`--workers` must be an integer from 1 to 256, got 0"),
        (["--pp", "2", "-m", "4", "--seed", str(2**40)], "`--seed` must be an integer from 0 to 2147483647"),
        (["--pp", "2", "-m", "4", "--cost", "forward=nan"], "bad cost `forward=nan`: `forward` is not a number (NaN)"),
        (["--pp", "2", "-m", "4", "--cost", "forward=inf"], "bad cost `forward=inf`: `forward` is over 1e15"),
        (["--pp", "2", "-m", "4", "--cost", "forward=1e300"], "bad cost `forward=1e300`: `forward` is over 1e15"),
        (
            ["--pp", "2", "-m", "4", "--periodic", "--cost", "forward=1e15,backward=0.000001"],
            "more than the search counts",
        ),
        (["--pp", "2", "-m", "4", "--cost", "forward=0,backward=0,backward_b=0,backward_w=0"], "every job costs 0"),
        (["--pp", "2", "-m", "4", "--name", 'a"b'], 'the name `a"b` holds `"`, which would end the string'),
        (["--pp", "2", "-m", "4", "--name", "a\nb"], "the name `a\\nb` holds a character that cannot be written"),
        (
            ["--pp", "2", "-m", "4", "--backward-b-frees", "2"],
            "`--backward-b-frees` must be a number from 0 to 1, got 2",
        ),
        (["--pp", "2", "-m", "4", "--periodic", "--exact"], "--periodic and --exact do not combine"),
    ],
)
def test_bad_input_is_a_usage_error(args, message, tmp_path):
    result = synth(*args, "-o", str(tmp_path / "s.sched"))
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("option", "message"), [("--exact", "`--exact` needs OR-Tools"), ("--periodic", "`--periodic`")]
)
def test_cp_sat_options_without_ortools_say_how_to_install(option, message, tmp_path):
    out = tmp_path / "s.sched"
    code = (
        "import sys; sys.modules['ortools'] = None\n"
        "from ppdsl.cli import main\n"
        f"sys.argv = ['ppdsl', 'synth', '--pp', '2', '-m', '2', {option!r}, '-o', {str(out)!r}]\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "E041" in proc.stderr and message in proc.stderr and "pip install 'ppdsl[synth]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


# ------------------------------------------------------------------------------------------ periodic


@pytest.mark.parametrize(
    ("shape", "costs", "limit"),
    [
        (["--vpp", "2", "--placement", "vshape"], UNIFORM, "4"),  # half of ZB-V's memory
        (["--vpp", "2", "--placement", "vshape"], HETERO, "6"),
        ([], HETERO, "3"),
        (["--split-backward", "no"], UNIFORM, "4"),
    ],
    ids=["v-uniform-mem4", "v-hetero-mem6", "looped-hetero-mem3", "looped-whole-backward"],
)
def test_a_periodic_schedule_holds_for_any_number_of_microbatches(shape, costs, limit, tmp_path):
    out = tmp_path / "p.sched"
    pairs = ",".join(f"{k}={v}" for k, v in costs.items())
    args = ["--pp", "4", "-m", "8", *shape, "--cost", pairs, "--memory-limit", limit, "--periodic"]
    result = synth(*args, "--time-limit", "2", "-o", str(out), "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    text = out.read_text()
    assert "for n in 0 .. microbatches" in text and "microbatches ==" not in text
    vpp = 2 if "--vpp" in shape else 1
    assert ppdsl.check(out, pp=4, microbatches=8, vpp=vpp).makespan == report["makespan"]
    period = float(report["found_by"].split("period ")[1].split(",")[0])
    previous = None
    for m in (1, 3, 8, 13, 40):
        check = ppdsl.check(out, pp=4, microbatches=m, vpp=vpp)
        assert check.valid, (m, check.diagnostics)
        assert max(r.peak_activations for r in check.ranks) <= float(limit)
        if previous is not None and m > 8:
            # in the steady state each micro-batch adds one period (less where the warm-up overlaps)
            assert check.makespan - previous[1] <= period * (m - previous[0]) + 1e-6
        previous = (m, check.makespan)
    other = runner.invoke(app, ["check", str(out), "--pp", "2", "-m", "8", "--vpp", str(vpp)])
    assert other.exit_code == 1 and "any number of micro-batches" in other.output


# ------------------------------------------------------------------------------------------ properties


@st.composite
def requests(draw):
    placement = draw(st.sampled_from(["looped", "vshape"]))
    pp = draw(st.integers(1, 3))
    vpp = 2 if placement == "vshape" else draw(st.sampled_from([1, 1, 2]))
    m = draw(st.integers(1, 5))
    costs = draw(st.sampled_from([UNIFORM, HETERO]))
    split = draw(st.sampled_from(["auto", "yes", "no"]))
    need = float(vpp)  # a micro-batch's forwards on all of a rank's stages
    limit = draw(st.sampled_from([None, need, need + 0.5, need + 1, 2 * need + 1]))
    return SynthRequest(pp, m, vpp, placement, CostSpec(costs), limit, split=split, time_limit=0.3, library=False)


@pytest.mark.e2e
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=requests())
def test_synthesized_schedules_check_valid_within_the_limit(request):
    outcome = synthesize_file(request)  # checks the written text itself, and raises if it disagrees
    check = outcome.check
    assert check.valid
    limit = request.memory_limit
    if limit is not None:
        assert max(r.peak_activations for r in check.ranks) <= limit + 1e-9
    assert outcome.result.lower_bound <= check.makespan + 1e-9
    used = {jt for jt, _, _ in check.expansion.job_tuples(0)} | {
        jt for r in range(request.pp) for jt, _, _ in check.expansion.job_tuples(r)
    }
    if request.split == "no":
        assert not used & {"backward_b", "backward_w"}
    if request.split == "yes":
        assert "backward" not in used


# ------------------------------------------------------------------------------------------ exact = brute force


def _orders_of_rank(jobs: list[tuple[int, int, int]]):
    """Every order of a rank's jobs that keeps each micro-batch's F before its backward, I before W, and each
    job type's micro-batches in order (as the exact model does)."""

    def before(a, b) -> bool:  # must a come before b?
        (ta, sa, ma), (tb, sb, mb) = a, b
        if sa == sb and ta == tb:
            return ma < mb
        if ma != mb or sa != sb:
            return False
        rank = {FORWARD: 0, BACKWARD: 1, BACKWARD_B: 1, BACKWARD_W: 2}
        return rank[ta] < rank[tb]

    for perm in itertools.permutations(jobs):
        if all(not before(perm[j], perm[i]) for i in range(len(perm)) for j in range(i + 1, len(perm))):
            yield list(perm)


def _brute_force(problem) -> float:
    per_rank = []
    backward = [BACKWARD] if problem.split == "no" else [BACKWARD_B, BACKWARD_W]
    for r in range(problem.pp):
        jobs = [(t, s, mb) for s in problem.stages_of[r] for mb in range(problem.microbatches)
                for t in (FORWARD, *backward)]  # fmt: skip
        per_rank.append(list(_orders_of_rank(jobs)))
    ev = Evaluator(problem)
    best = float("inf")
    for combo in itertools.product(*per_rank):
        orders = list(combo)
        assert complete(problem, orders)
        e = ev.evaluate(orders)
        if e.feasible:
            best = min(best, e.makespan)
    return best


@pytest.mark.parametrize(
    ("pp", "m", "costs", "limit", "split"),
    [
        (2, 2, UNIFORM, None, "yes"),
        (2, 2, HETERO, 1.5, "yes"),
        (2, 3, HETERO, 2.0, "yes"),
        (2, 3, UNIFORM, 1.0, "no"),
        (3, 2, HETERO, 1.5, "yes"),
        (2, 2, {"forward": 1, "backward": 1.5, "backward_b": 1, "backward_w": 1}, 2.0, "auto"),
    ],
)
def test_exact_agrees_with_brute_force(pp, m, costs, limit, split):
    problem = build_problem(pp, m, costs=CostSpec(costs), memory_limit=limit, split=split)
    if split == "auto":  # brute force over both: every (stage, micro-batch) whole or split
        problem_yes = build_problem(pp, m, costs=CostSpec(costs), memory_limit=limit, split="yes")
        problem_no = build_problem(pp, m, costs=CostSpec(costs), memory_limit=limit, split="no")
        expected_upper = min(_brute_force(problem_yes), _brute_force(problem_no))
    else:
        expected_upper = _brute_force(problem)
    sol = solve(problem, 20.0)
    assert sol.status == "OPTIMAL"
    found = Evaluator(problem).evaluate(sol.orders)
    assert found.feasible
    if split == "auto":
        assert found.makespan <= expected_upper + 1e-9  # mixing whole and split may do better still
        assert sol.bound <= expected_upper + 1e-9
    else:
        assert found.makespan == pytest.approx(expected_upper)
        assert sol.bound == pytest.approx(expected_upper)
    assert lower_bound(problem) <= found.makespan + 1e-9


def test_exact_proves_the_optimum_and_the_cli_says_so(tmp_path):
    out = tmp_path / "s.sched"
    result = synth("--pp", "3", "-m", "4", "--memory-limit", "2", "--cost", "backward_b=1.5,backward_w=0.7",
                   "--exact", "--time-limit", "30", "-o", str(out), "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["optimal"] is True
    assert report["makespan"] == pytest.approx(report["lower_bound"])


def test_compare_adds_the_synthesized_schedules_at_the_same_limit():
    args = ["compare", "--pp", "4", "-m", "8", "--library", "--memory-limit", "4", "--synth", "--time-limit", "2"]
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["schedule"]: r for r in json.loads(result.stdout)["rows"]}
    looped, v = rows["synth (looped)"], rows["synth (V)"]
    assert looped["status"] == v["status"] == "ok"
    assert looped["peak_activations"] <= 4 and v["peak_activations"] <= 4 and not looped["over_limit"]
    # within the same limit, nothing in the library is faster than what synth finds with the same chunks
    fits = [r for r in rows.values() if r["status"] == "ok" and not r["over_limit"] and "synth" not in r["schedule"]]
    assert all(r["makespan"] >= looped["makespan"] for r in fits if r["vpp"] == 1)
    assert all(r["makespan"] >= v["makespan"] for r in fits if r["vpp"] == 2)


@pytest.mark.parametrize(
    "cost", ["forward=0.0000001", "forward=0", "backward=123456789.125", "forward=0,backward_b=0,backward_w=0"]
)
def test_costs_are_written_in_the_language_s_notation(cost, tmp_path):
    """`1e-07` (Python's repr) is not a number the language reads: the written file did not check (a TypeError
    escaped from the verification)."""
    out = tmp_path / "s.sched"
    result = synth("--pp", "2", "-m", "4", "--cost", cost, "--time-limit", "0.2", "--no-library", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "e-" not in out.read_text(encoding="utf-8").split('"""')[2]  # the declarations, after the docstring
    assert runner.invoke(app, ["check", str(out), "--pp", "2", "-m", "4"]).exit_code == 0


def test_the_docstring_holds_any_command_line(tmp_path):
    """An output path (or any option) with three double quotes or a control character in it is quoted in the
    docstring: it must not end the docstring nor add a line to it."""
    out = tmp_path / 'x"""y\u2028z.sched'
    result = synth("--pp", "2", "-m", "4", "--time-limit", "0.2", "--no-library", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["check", str(out), "--pp", "2", "-m", "4"]).exit_code == 0
