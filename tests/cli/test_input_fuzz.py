"""A fuzz corpus for every reader of numbers and text from outside a schedule: cost files (`--costs`), `--cost`
pairs, PyTorch CSVs (`import`), `--param` values and every numeric flag of every command (but `run`'s training
flags). Each case runs the real command line in-process and must end with exit 0, 1 or 2, with no traceback and
no Python exception name in what it prints.

Bounded: about 50 examples a reader, sizes kept small by `--max-jobs`, the search by `--time-limit`.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ppdsl.analysis.costs import COST_FILE_KEYS
from ppdsl.cli import app
from ppdsl.plan.kinds import KINDS

runner = CliRunner()
FUZZ = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
PYTHON_NAMES = re.compile(r"Traceback|\b[A-Z]\w+(Error|Exception)\b|\bobject has no attribute\b|\bNoneType\b")
SMALL = ["--pp", "2", "-m", "2"]
BOUND = ["--max-jobs", "2000"]  # sizes a fuzzed flag makes large are refused before anything runs


def run_clean(args: list[str], echoed: str = "") -> int:
    """Run `ppdsl args` in-process: the exit code, after checking that nothing but an exit left the command and
    that no Python word reached the output (`echoed`: user text the output may quote, left out of the check)."""
    result = runner.invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"`ppdsl {' '.join(args)}` raised {result.exception!r}") from result.exception
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    shown = (result.stdout + result.stderr).replace(echoed, "") if echoed else result.stdout + result.stderr
    found = PYTHON_NAMES.search(shown)
    assert found is None, f"`{found.group()}` in the output of `ppdsl {' '.join(args)}`:\n{shown[-2000:]}"
    return result.exit_code


# ------------------------------------------------------------------------------------------------- numbers

NUMBER_TEXTS = [
    "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "-0", "0", "-1", "1e999", "1e-999", "1e308", "0x10", "1_000",
    " 5", "", "٣", "1.5", "2", "9" * 5000, "9" * 400 + ".5", "-" + "9" * 30, "1e15", "1e16", "abc", "1,2", "=",
]  # fmt: skip


def number_texts() -> st.SearchStrategy[str]:
    """What a user may type where a number goes: awkward literals, random floats and integers, random text."""
    return st.one_of(
        st.sampled_from(NUMBER_TEXTS),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.integers(-(2**70), 2**70).map(str),
        st.text(max_size=12),
    )


def json_values(leaf_numbers: bool = True) -> st.SearchStrategy[object]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(10**30), 10**30),
        st.text(max_size=8),
    )
    return st.recursive(leaves, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(keys(), kids, max_size=3))


def keys() -> st.SearchStrategy[str]:
    """Keys a cost file has, job types, their near misses (one character changed, dropped or doubled), others."""
    real = [*COST_FILE_KEYS, *KINDS, "0", "1", "3"]

    def near(word: str, i: int, ch: str) -> str:
        i %= len(word) + 1
        return (word[:i] + ch + word[i + 1 :], word[:i] + word[i + 1 :], word[:i] + ch + word[i:])[len(ch) % 3]

    return st.one_of(
        st.sampled_from(real),
        st.builds(near, st.sampled_from(real), st.integers(0, 12), st.text(min_size=1, max_size=2)),
        st.text(max_size=10),
    )


@st.composite
def cost_files(draw) -> str:
    """Text of a cost file: a random JSON value, one shaped like a cost file with random keys and numbers, deep
    nesting, or a valid file cut short."""
    kind = draw(st.sampled_from(["value", "shaped", "deep", "cut"]))
    if kind == "value":
        return json.dumps(draw(json_values()))
    if kind == "deep":
        depth = draw(st.sampled_from([10, 64, 65, 500, 100_000]))
        opening = draw(st.sampled_from(["[", '{"a":']))
        return opening * depth + "1" + ("]" if opening == "[" else "}") * depth
    numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**400), json_values())
    per_type = st.dictionaries(keys(), numbers, max_size=4)
    shaped = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "costs": per_type,
                "stages": st.dictionaries(keys(), per_type | json_values(), max_size=3),
                "latency": numbers,
                "bandwidth": numbers,
                "unit": st.sampled_from(["s", "ms", "us", "h", ""]) | json_values(),
                draw(keys()): json_values(),
            },
        )
    )
    text = json.dumps(shaped)  # NaN and Infinity written as the literals Python's json reads
    return text[: draw(st.integers(0, len(text)))] if kind == "cut" else text


@pytest.mark.e2e
@FUZZ
@given(text=cost_files(), command=st.sampled_from(["check", "trace", "compare"]))
def test_cost_files(text, command, tmp_path_factory):
    path = tmp_path_factory.mktemp("costs") / "c.json"
    path.write_text(text, encoding="utf-8")
    base = {"check": ["check", "1f1b"], "trace": ["trace", "zbh1"], "compare": ["compare", "1f1b"]}[command]
    code = run_clean([*base, *SMALL, "--costs", str(path)], echoed=text)
    if code == 0:  # accepted: then it was a cost file, every time finite and from 0
        data = json.loads(text)
        assert isinstance(data, dict) and set(data) <= set(COST_FILE_KEYS)


@pytest.mark.e2e
@FUZZ
@given(pairs=st.lists(st.tuples(keys(), number_texts()), min_size=1, max_size=4))
def test_cost_pairs(pairs):
    text = ",".join(f"{k}={v}" for k, v in pairs)
    assume(text and not text.startswith("-"))  # (a leading `-` is an option to the command line)
    code = run_clean(["check", "1f1b", *SMALL, "--cost", text], echoed=text)
    if code == 0:
        for _, value in pairs:
            number = float(value)
            assert math.isfinite(number) and 0 <= number <= 1e15


# ------------------------------------------------------------------------------------------------- CSV


@st.composite
def csv_texts(draw) -> str:
    """Rows of cells: real actions with random numbers (huge ones too), overlaps, torch-only actions, junk."""
    number = st.one_of(st.integers(0, 9).map(str), st.integers(0, 10**12).map(str), st.just("9" * 5000))
    action = st.builds(lambda s, k, m: f"{s}{k}{m}", number, st.sampled_from("FBIW"), number)
    cell = st.one_of(
        action,
        st.builds(lambda a, b: f"({a};{b})OVERLAP_F_B", action, action),
        st.sampled_from(["", " ", "0UNSHARD", "1SEND_F0", "F0", "0X0", "\ufeff0F0", "0F0\u2028"]),
        st.text(max_size=6),
    )
    rows = draw(st.lists(st.lists(cell, max_size=8), min_size=0, max_size=5))
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return newline.join(",".join(row) for row in rows)


@pytest.mark.e2e
@FUZZ
@given(text=csv_texts(), name=st.none() | st.text(max_size=8), placement=st.sampled_from([None, "looped", "vshape"]))
def test_import_csv(text, name, placement, tmp_path_factory):
    folder = tmp_path_factory.mktemp("csv")
    path = folder / "s.csv"
    path.write_text(text, encoding="utf-8", newline="")
    args = ["import", str(path), "-o", str(folder / "s.sched")]
    args += ["--name", name] if name is not None and not name.startswith("-") else []
    args += ["--placement", placement] if placement else []
    run_clean(args, echoed=text)


# ------------------------------------------------------------------------------------------------- --param

PARAMS = [
    ("vpp", ["--vpp", "2"], "split_backward"),
    ("tests/codegen/features.sched", ["--vpp", "2"], "jobs"),
    ("tests/codegen/features.sched", ["--vpp", "2"], "scale"),
    ("1f1b", [], "nosuch"),
]


@pytest.mark.e2e
@FUZZ
@given(case=st.sampled_from(PARAMS), value=number_texts() | st.sampled_from(["true", "false", "True", "yes"]))
def test_param_values(case, value, in_repo):
    schedule, extra, name = case
    run_clean(["check", schedule, *SMALL, *extra, *BOUND, "--param", f"{name}={value}"], echoed=value)


# ------------------------------------------------------------------------------------------------- flags

# (command with the arguments it needs, the numeric flag): every numeric flag of every command but `run`'s
COMMAND_FLAGS = [
    *((["check", "1f1b", *SMALL, *BOUND], f) for f in ("--pp", "-m", "--vpp", "--batch-size", "--memory-limit")),
    (["check", "1f1b", *SMALL], "--max-jobs"),
    *((["expand", "1f1b", *SMALL, *BOUND], f) for f in ("--pp", "-m", "--vpp")),
    *((["show", "1f1b", *SMALL, *BOUND], f) for f in ("--pp", "--block")),
    *((["trace", "1f1b", *SMALL, *BOUND, "-o", "t.json"], f) for f in ("-m", "--vpp")),
    (["plot", "1f1b", *SMALL, *BOUND, "-o", "p.svg"], "--dpi"),
    *((["compare", *SMALL, *BOUND, "1f1b"], f) for f in ("--pp", "--vpp", "--time-limit", "--memory-limit")),
    (["sweep", "1f1b", "--pp", "2", "-m", "2", *BOUND], "-m"),
    (["sweep", "1f1b", "--pp", "2", "-m", "2", *BOUND], "--vpp"),
    *(
        (["synth", *SMALL, *BOUND, "-o", "s.sched", "--no-library", "--time-limit", "0.05"], f)
        for f in ("--pp", "--backward-b-frees", "--seed", "--workers", "--memory-limit", "--time-limit")
    ),
    *((["compile", "1f1b", *SMALL, *BOUND, "-o", "plan.py"], f) for f in ("--pp", "-m", "--vpp")),
]


def expensive(command: list[str], flag: str, value: str) -> bool:
    """Values the command accepts that would make this test slow (a long search, a large picture)."""
    try:
        number = float(value)
    except ValueError:
        return False
    return (flag == "--time-limit" and number > 0.2) or (flag == "--dpi" and number > 150)


@pytest.mark.e2e
@FUZZ
@given(case=st.sampled_from(COMMAND_FLAGS), value=number_texts())
def test_numeric_flags(case, value, tmp_path_factory, monkeypatch):
    command, flag = case
    assume(not value.startswith("-") or value[1:2].isdigit() or value[1:] in ("inf", "nan"))
    assume(not expensive(command, flag, value))
    monkeypatch.chdir(tmp_path_factory.mktemp("flags"))
    args = list(command)
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    code = run_clean(args, echoed=value)
    if code == 0 and flag not in ("--memory-limit",) and command[0] != "sweep":
        number = float(value)
        assert math.isfinite(number), f"`{flag} {value}` was accepted"
