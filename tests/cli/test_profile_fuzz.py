"""Hostile profiles for `ppdsl calibrate` and `ppdsl plot --measured` (issue 26): every field of a Chrome trace
of the wrong type, missing, NaN, negative or huge is an E009 diagnostic naming the event and the field, never a
traceback; and `calibrate` never exits 0 writing a cost file that ppdsl's own reader (`--costs`) refuses."""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ppdsl.analysis.costs import load_costs
from ppdsl.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def base_profile(tmp_path_factory) -> dict:
    """A real profile: `ppdsl trace` of 1F1B, with the run figures `ppdsl run --profile` adds."""
    path = tmp_path_factory.mktemp("trace") / "t.json"
    done = runner.invoke(app, ["trace", "1f1b", "--pp", "2", "-m", "2", "-o", str(path)])
    assert done.exit_code == 0, done.output
    data = json.loads(path.read_text())
    data["otherData"] |= {"schedule_file": data["otherData"]["file"], "steps": 1, "wall_seconds": 0.02}
    return data


def _job_events(data: dict) -> list[dict]:
    return [e for e in data["traceEvents"] if e.get("ph") == "X" and "type" in e.get("args", {})]


HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([-1, -1e308, 1e308, 10**30, 1e-320, 0, 1.5, math.nan, math.inf, -math.inf]),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
EVENT_KEYS = ["ts", "dur", "pid", "name", "args.type", "args.stage", "args.chunk", "args.microbatch", "args.step"]
META_KEYS = ["us_per_unit", "pp", "vpp", "microbatches", "steps", "wall_seconds", "schedule_file", "params"]
DELETE = object()


def _mutated(base: dict, where: str, key: str, value: object, index: int) -> str:
    """The base profile with one field of one job event (or of `otherData`) replaced or removed, as JSON text
    (NaN and infinities written as `NaN` / `Infinity`, as Python's json and some tracers do)."""
    data = copy.deepcopy(base)
    if where == "meta":
        target = data["otherData"]
    else:
        events = _job_events(data)
        target = events[index % len(events)]
        if key.startswith("args."):
            target, key = target["args"], key[5:]
    if value is DELETE:
        target.pop(key, None)
    else:
        target[key] = value
    return json.dumps(data)


def _check(args: list[str], cost_file=None) -> None:
    done = runner.invoke(app, args)
    assert done.exception is None or isinstance(done.exception, SystemExit), (
        f"{args}: {type(done.exception).__name__}: {done.exception}"
    )
    assert done.exit_code in (0, 1, 2), done.output
    if done.exit_code == 2:
        assert "error[E" in done.output and "Traceback" not in done.output, done.output
    if cost_file is not None and done.exit_code == 0:
        load_costs(cost_file)  # raises DiagnosticError for a cost file ppdsl refuses


FIELD = st.one_of(
    st.tuples(st.just("event"), st.sampled_from(EVENT_KEYS)), st.tuples(st.just("meta"), st.sampled_from(META_KEYS))
)


@pytest.mark.e2e
@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(field=FIELD, value=st.one_of(HOSTILE, st.just(DELETE)), index=st.integers(0, 20))
def test_calibrate_on_a_hostile_profile_is_a_diagnostic_or_a_cost_file_ppdsl_reads(
    base_profile, tmp_path_factory, field, value, index
):
    where, key = field
    tmp = tmp_path_factory.mktemp("fuzz")
    (tmp / "p.json").write_text(_mutated(base_profile, where, key, value, index))
    _check(["calibrate", str(tmp / "p.json"), "-o", str(tmp / "c.json")], tmp / "c.json")


@pytest.mark.e2e
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(field=FIELD, value=st.one_of(HOSTILE, st.just(DELETE)), index=st.integers(0, 20))
def test_plot_measured_on_a_hostile_profile_is_a_diagnostic_or_a_picture(
    base_profile, tmp_path_factory, field, value, index
):
    where, key = field
    tmp = tmp_path_factory.mktemp("fuzz")
    (tmp / "p.json").write_text(_mutated(base_profile, where, key, value, index))
    _check(["plot", "--measured", str(tmp / "p.json"), "-o", str(tmp / "p.png")])


@pytest.mark.parametrize(
    ("where", "key", "value", "said"),
    [
        ("event", "dur", -5, "`dur` is -5, not a duration from 0"),
        ("event", "dur", "nan", '`dur` is "nan", not a duration'),  # float("nan") read it before
        ("event", "ts", 1e308, "`ts` is 1e+308, not a time stamp"),
        ("event", "pid", "a", '`pid` is "a", not an integer from 0'),
        ("event", "args.stage", -3, "`args.stage` is -3, not an integer from 0"),
        ("event", "args.type", 1, "`args.type` is 1, not the name of a job type"),
        ("meta", "us_per_unit", "x", '`otherData.us_per_unit` is "x", not a number of microseconds'),
        ("meta", "us_per_unit", 1e-320, "`otherData.us_per_unit` is 1e-320"),
        ("meta", "wall_seconds", 0, "`otherData.wall_seconds` is 0: not a time in seconds above 0"),
        ("meta", "steps", "x", '`otherData.steps` is "x": not an integer from 1'),
    ],
)
def test_each_bad_figure_is_named_where_and_what(base_profile, tmp_path, where, key, value, said):
    """Before: `dur` -5 or NaN, a tiny `us_per_unit` and a negative stage exited 0 writing negative or NaN costs
    (and a stage `-3`) that `--costs` refuses; a text `us_per_unit` or `steps` and `wall_seconds` 0 were
    tracebacks (ValueError, ZeroDivisionError)."""
    (tmp_path / "p.json").write_text(_mutated(base_profile, where, key, value, 0))
    done = runner.invoke(app, ["calibrate", str(tmp_path / "p.json"), "-o", str(tmp_path / "c.json")])
    assert done.exit_code == 2 and isinstance(done.exception, SystemExit | None), done.output
    assert "error[E009]" in done.output and said in " ".join(done.output.split()), done.output
    assert not (tmp_path / "c.json").exists()


def test_a_profile_without_stages_calibrates_to_costs_ppdsl_reads(base_profile, tmp_path):
    """Before: jobs with no `args.stage` were costed under a stage `-1`, which `--costs` refuses."""
    data = copy.deepcopy(base_profile)
    for event in _job_events(data):
        event["args"].pop("stage", None)
    (tmp_path / "p.json").write_text(json.dumps(data))
    done = runner.invoke(app, ["calibrate", str(tmp_path / "p.json"), "-o", str(tmp_path / "c.json")])
    assert done.exit_code == 0, done.output
    costs = load_costs(tmp_path / "c.json")
    assert costs["costs"]["forward"] > 0 and not costs.get("stages")


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", '"x"', '{"traceEvents": {}}', "\xff"])
def test_a_profile_that_is_not_a_trace_is_a_diagnostic(tmp_path, text):
    (tmp_path / "p.json").write_text(text, encoding="latin-1")
    for args in (
        ["calibrate", str(tmp_path / "p.json"), "-o", str(tmp_path / "c.json")],
        ["plot", "--measured", str(tmp_path / "p.json"), "-o", str(tmp_path / "p.png")],
    ):
        done = runner.invoke(app, args)
        assert done.exit_code == 2 and "error[E" in done.output, done.output
