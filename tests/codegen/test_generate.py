"""`ppdsl compile`: golden plan modules, lint-clean, and equal to `ppdsl expand` wherever the tests sweep.

`python -m pytest tests/codegen/test_generate.py --update-golden` rewrites `tests/golden/plans/`; review the diff.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib.util
import keyword
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ppdsl import __version__
from ppdsl.analysis.expand import expand
from ppdsl.analysis.scenario import Scenario
from ppdsl.cli import app
from ppdsl.codegen.generate import generate_plan_module, module_stem, py_literal
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_files
from ppdsl.language.pysource import LINE_LENGTH
from ppdsl.language.readable_order import readable_name
from ppdsl.language.resolve import load, resolve_text

from paths import ROOT

PLANS = ROOT / "tests" / "golden" / "plans"
FEATURES = "tests/codegen/features.sched"  # what the library does not use: includes, renamed names, ...
FUNCTIONS = "tests/codegen/functions.sched"  # user functions (`fn`) everywhere an expression goes
LIBRARY = [p.stem for p in library_files()]
LITERAL = ("1f1b", Scenario("1f1b", pp=4, microbatches=8))  # the --literal golden


def plan_text(stem_or_path: str, literal: Scenario | None = None) -> str:
    """The plan of a library schedule (by stem) or a file, generated from the repository root, as the goldens are."""
    path = stem_or_path if stem_or_path.endswith(".sched") else f"schedules/{stem_or_path}.sched"
    return generate_plan_module(load(path), path, literal=literal)


def import_plan(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"plan_under_test_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def plan(in_repo, tmp_path):
    """plan(stem_or_path, literal=None) -> the generated module, written to a file and imported from it."""

    def make(stem_or_path: str, literal: Scenario | None = None) -> types.ModuleType:
        target = tmp_path / f"plan_{Path(stem_or_path).stem}.py"
        target.write_text(plan_text(stem_or_path, literal), encoding="utf-8")
        return import_plan(target)

    return make


# ---------------------------------------------------------------------- golden files


@pytest.mark.parametrize("stem", [*LIBRARY, "features", "functions", "1f1b_literal"])
def test_golden_plan(stem, in_repo, golden):
    if stem == "features":
        text = plan_text(FEATURES)
    elif stem == "functions":
        text = plan_text(FUNCTIONS)
    elif stem == "1f1b_literal":
        text = plan_text(LITERAL[0], LITERAL[1])
    else:
        text = plan_text(stem)
    golden(PLANS / f"plan_{stem}.py", text)


def test_every_library_schedule_has_a_golden_plan():
    assert {f"plan_{s}.py" for s in LIBRARY} <= {p.name for p in PLANS.glob("*.py")}


def _ruff() -> list[str] | None:
    if exe := shutil.which("ruff"):
        return [exe]
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    return None


def assert_ruff_clean(*files: Path) -> None:
    """`ruff check` and `ruff format --check` under the project's settings, from a folder outside `tests/` (whose
    per-file ignores relax E501)."""
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the `test` extra)")
    folder = Path(tempfile.mkdtemp(prefix="ppdsl-plans-"))
    try:
        for file in files:
            shutil.copy(file, folder / file.name)
        config = ["--config", str(ROOT / "pyproject.toml"), "--no-cache"]
        lint = subprocess.run([*ruff, "check", *config, str(folder)], capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout + lint.stderr
        fmt = subprocess.run([*ruff, "format", "--check", *config, str(folder)], capture_output=True, text=True)
        assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    finally:
        shutil.rmtree(folder)


def test_golden_plans_pass_ruff_check_and_format():
    assert_ruff_clean(*PLANS.glob("*.py"))


def test_generation_is_deterministic_and_independent_of_the_working_directory(in_repo, monkeypatch, tmp_path):
    first = plan_text(FEATURES)
    defn = load(ROOT / FEATURES)
    monkeypatch.chdir(tmp_path)
    again = generate_plan_module(defn, FEATURES)  # same name for the file, from elsewhere
    assert first == again


def test_lines_fit_the_line_length():
    for golden_file in PLANS.glob("*.py"):
        long = [line for line in golden_file.read_text().splitlines() if len(line) > LINE_LENGTH]
        assert not long, f"{golden_file.name}: {long[0]}"


# ---------------------------------------------------------------------- job_list == ppdsl expand

SWEEP = [(pp, vpp, m) for pp in range(1, 7) for vpp in range(1, 4) for m in range(1, 3 * pp + 2)]


def assert_same_as_expand(module: types.ModuleType, defn, params: dict) -> tuple[int, int]:
    """For every size of the sweep: `job_list` of every rank equals the expansion, `check_requires` raises exactly
    where expand reports S100, and `job_list` raises ValueError for a rank where expand reports anything else.
    Returns (sizes that expand, sizes that do not)."""
    counts = [0, 0]
    for pp, vpp, m in SWEEP:
        try:
            exp, codes = expand(defn, pp, m, vpp, params), set()
        except DiagnosticError as err:
            exp, codes = None, {d.code for d in err.diagnostics}
        required = True
        try:
            module.check_requires(pp, vpp, m, **params)
        except ValueError:
            required = False
        assert required == ("S100" not in codes), (pp, vpp, m, codes)
        if exp is not None:
            counts[0] += 1
            for r in range(pp):
                assert module.job_list(r, pp, vpp, m, **params) == exp.job_tuples(r), (pp, vpp, m, r)
                assert [module.stage_of(r, c, pp, vpp, **params) for c in range(vpp)] == exp.stage_of[r]
            assert [rule["priority"] for rule in module.stream_rules(pp, vpp, m, **params)] == [
                rule.priority for rule in exp.rules
            ]
            continue
        counts[1] += 1
        failures = 0
        for r in range(pp):
            try:
                module.job_list(r, pp, vpp, m, **params)
            except ValueError:
                failures += 1
        assert failures, f"expand reports {codes} at pp={pp} vpp={vpp} m={m}, but every rank's job_list runs"
    return counts[0], counts[1]


@pytest.mark.parametrize("stem", LIBRARY)
def test_job_list_equals_expand_over_the_sweep(stem, plan):
    module = plan(stem)
    ok, _ = assert_same_as_expand(module, load(f"schedules/{stem}.sched"), {})
    assert ok > 0


def test_vpp_split_backward_equals_expand(plan):
    module = plan("vpp")
    ok, _ = assert_same_as_expand(module, load("schedules/vpp.sched"), {"split_backward": True})
    assert ok > 0
    # split_backward changes the order where it applies (microbatches == pp)
    assert module.job_list(0, 2, 2, 2, split_backward=True) != module.job_list(0, 2, 2, 2)


def test_features_equal_expand_with_renamed_parameters(plan):
    """Python names (`list`, `lambda`, `jobs`, `_rest`, `x_`) survive, and parameters pass by their Python names."""
    module = plan(FEATURES)
    defn = load(FEATURES)
    assert module.PARAMS == {"lambda": 1, "jobs": 0, "scale": 1.5}
    assert_same_as_expand(module, defn, {})
    for dsl, python in ((("lambda", 3), ("lambda_", 3)), (("jobs", 2), ("jobs_", 2))):
        exp = expand(defn, 3, 5, 2, dict([dsl]))
        kwargs = dict([python])
        assert [module.job_list(r, 3, 2, 5, **kwargs) for r in range(3)] == [exp.job_tuples(r) for r in range(3)]
        rules = module.stream_rules(3, 2, 5, **kwargs)
        assert [rule["priority"] for rule in rules] == [rule.priority for rule in exp.rules]


@pytest.mark.parametrize("split", [False, True])
def test_functions_are_python_functions_and_equal_expand(split, plan):
    """A `fn` becomes a function of the plan module, called from job_list, the placement, a require and a priority."""
    module = plan(FUNCTIONS)
    ok, _ = assert_same_as_expand(module, load(FUNCTIONS), {"split": split})
    assert ok > 0
    assert module.per_round(4, 8) == 4 and module.chunk_of(5, 4, 2, 8) == 1  # 8 // (8 // 4); 5 // 4 % 2
    assert module.list_(7) == 4  # named like a builtin: renamed, as user names are
    assert module.pick(True, 1, 2) == 1 and module.pick(False, True, False) is False


def test_table_schedules_pick_their_table_and_refuse_other_sizes(tmp_path, monkeypatch):
    src = """
    table when pp == 2 { rank 0: F0 F1 B0 B1 optimizer  rank 1: F0 B0 F1 B1 optimizer }
    table when pp == 3 { rank 0: F0.c1 B0.c1 optimizer  rank 1: F0 B0 optimizer  rank 2: F0 B0 optimizer }
    table { rank 0: F0 B0 optimizer }
    """
    path = tmp_path / "tables.sched"
    path.write_text(src)
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "plan_tables.py"
    target.write_text(generate_plan_module(load("tables.sched"), "tables.sched"))
    module = import_plan(target)
    assert_same_as_expand(module, load("tables.sched"), {})
    row = [("forward", 0, 0), ("backward", 0, 0), ("forward", 0, 1), ("backward", 0, 1), ("optimizer", 0, 0)]
    assert module.job_list(1, 2, 1, 2) == row
    with pytest.raises(ValueError, match=r"tables.sched:4: the table has rows for ranks \[0\], but pp = 4"):
        module.job_list(0, 4, 1, 2)
    with pytest.raises(ValueError, match="chunk 1 of `forward` does not exist with vpp = 1"):
        module.job_list(1, 3, 1, 2)  # rank 0's row is wrong for every rank, as for `ppdsl check`
    assert_ruff_clean(target)


def test_a_table_without_a_matching_when_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "t.sched").write_text("table when pp == 2 { rank 0: F0 B0 optimizer rank 1: F0 B0 optimizer }")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan_t.py").write_text(generate_plan_module(load("t.sched"), "t.sched"))
    module = import_plan(tmp_path / "plan_t.py")
    with pytest.raises(ValueError, match=r"t\.sched:1: no table of `t` is for pp=3, vpp=1, microbatches=1"):
        module.job_list(0, 3, 1, 1)


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ("forward * (pp - 2) backward * (pp - 2) optimizer", "S110", r"x.sched:1: the repeat count is negative \(-1\)"),
        ("repeat pp - 2 { forward backward } optimizer", "S110", r"x.sched:1: the repeat count is negative \(-1\)"),
        ("forward(chunk = 1) backward(chunk = 1) optimizer", "S108", "x.sched:1: chunk 1 does not exist: vpp = 1"),
        ("forward backward_w(mb = pp - 2) optimizer", "S107", r"x.sched:1: micro-batch -1 does not exist"),
    ],
)
def test_order_errors_are_value_errors_naming_the_source_line(body, code, message, tmp_path, monkeypatch):
    (tmp_path / "x.sched").write_text(f"order {{ {body} }}")
    monkeypatch.chdir(tmp_path)
    defn = load("x.sched")
    with pytest.raises(DiagnosticError) as err:
        expand(defn, 1, 1)
    assert [d.code for d in err.value.diagnostics] == [code]
    (tmp_path / "plan_x.py").write_text(generate_plan_module(defn, "x.sched"))
    module = import_plan(tmp_path / "plan_x.py")
    with pytest.raises(ValueError, match=message):
        module.job_list(0, 1, 1, 1)
    assert_ruff_clean(tmp_path / "plan_x.py")


def test_requires_and_bad_sizes_raise_value_errors(plan):
    module = plan("1f1b")
    with pytest.raises(ValueError, match=r"1f1b.sched:9: 1F1B needs at least as many micro-batches .* \(pp=4"):
        module.check_requires(4, 1, 3)
    with pytest.raises(ValueError, match=r"1f1b\.sched:10"):
        module.job_list(0, 4, 2, 8)
    with pytest.raises(ValueError, match="`microbatches` must be a positive integer, got 0"):
        module.job_list(0, 4, 1, 0)
    with pytest.raises(ValueError, match="rank 4 does not exist"):
        module.job_list(4, 4, 1, 8)
    with pytest.raises(TypeError):
        module.job_list(0, 4, 1, 8, no_such_param=1)


# ---------------------------------------------------------------------- --literal


def test_literal_plan_is_the_expansion_for_its_sizes_only(plan):
    module = plan("1f1b", Scenario("1f1b", pp=4, microbatches=8))
    exp = expand(load("schedules/1f1b.sched"), 4, 8)
    assert [module.job_list(r, 4, 1, 8) for r in range(4)] == [exp.job_tuples(r) for r in range(4)]
    with pytest.raises(ValueError, match=r"compiled for .* only"):
        module.job_list(0, 4, 1, 9)
    assert "for _ in range(" not in Path(module.__file__).read_text()  # a table, not loops


def test_literal_plan_with_parameters(plan):
    module = plan("vpp", Scenario("vpp", pp=2, microbatches=2, vpp=2, params={"split_backward": True}))
    exp = expand(load("schedules/vpp.sched"), 2, 2, 2, {"split_backward": True})
    assert module.job_list(1, 2, 2, 2, split_backward=True) == exp.job_tuples(1)
    with pytest.raises(ValueError, match="compiled for"):
        module.job_list(1, 2, 2, 2)  # split_backward=False is another plan


def test_literal_plan_of_sizes_the_schedule_rejects_is_a_diagnostic(in_repo):
    with pytest.raises(DiagnosticError) as err:
        plan_text("1f1b", Scenario("1f1b", pp=4, microbatches=2))
    assert [d.code for d in err.value.diagnostics] == ["S100"]


# ---------------------------------------------------------------------- header, runtime contract, no paddle


def test_header_names_the_source_its_hash_and_the_version(plan):
    module = plan(FEATURES)
    assert module.SCHEDULE == "Features"
    assert module.SOURCE == FEATURES
    assert module.SOURCE_SHA256 == hashlib.sha256((ROOT / FEATURES).read_bytes()).hexdigest()
    common = "tests/codegen/common.sched"
    assert module.INCLUDED_SHA256 == {common: hashlib.sha256((ROOT / common).read_bytes()).hexdigest()}
    assert module.PPDSL_VERSION == __version__
    assert f"ppdsl compile {FEATURES}" in module.__doc__


def test_public_names_and_data(plan):
    module = plan("1f1b")
    assert module.PLACEMENT == "looped" and module.PARAMS == {}
    assert [j["name"] for j in module.JOB_TYPES][-2:] == ["recv_forward", "send_backward"]
    assert module.JOB_TYPES[-2] == {
        "name": "recv_forward",
        "region": "forward",
        "ops": ["pd_op.recv_v2"],
        "before": "forward",
        "after": None,
        "receives": True,
        "sends": False,
    }
    assert module.REQUIRES[0]["condition"] == "microbatches >= pp"
    rule = module.STREAM_RULES[0]
    assert rule == {
        "pattern": "pd_op.send_v2",
        "job": None,
        "stream": "send_stream_{ring_id}",
        "priority": 0,
        "attrs": {"use_calc_stream": True, "dynamic_shape": False},
    }
    copy = module.stream_rules(4, 1, 8)[0]
    copy["attrs"]["use_calc_stream"] = False  # what the runtime does with it cannot change the module
    assert module.STREAM_RULES[0]["attrs"]["use_calc_stream"] is True
    assert plan("zbv").stage_of(0, 1, 4, 2) == 7  # vshape: chunk 1 comes back up


def test_build_plan_hands_the_runtime_the_plan_specification_of_its_data(plan, monkeypatch):
    """A plan module's one way into the runtime is a `PlanSpec` of its data at the sizes it is called with (no check
    merged its orders); paddle stays out of it (the runtime faked here)."""
    from ppdsl.plan.spec import PlanSpec

    module = plan(FEATURES)
    calls = []
    fake = types.ModuleType("ppdsl.runtime.plan")
    built = types.SimpleNamespace(plan="the plan")  # the runtime's BuiltPlan: the core.Plan and what runs it
    fake.build_plan = lambda *args, **kwargs: calls.append((args, kwargs)) or built
    monkeypatch.setitem(sys.modules, "ppdsl.runtime.plan", fake)
    assert module.build_plan("main", "startup", pp=3, vpp=2, microbatches=4, lambda_=2) == "the plan"
    ((args, kwargs),) = calls
    main, startup, spec = args
    assert (main, startup, kwargs) == ("main", "startup", {"rank": None})
    assert isinstance(spec, PlanSpec) and spec.merged is None
    exp = expand(load(FEATURES), 3, 4, 2, {"lambda": 2})
    assert spec.type_names == [jt["name"] for jt in module.JOB_TYPES] == exp.type_names
    assert [list(row) for row in spec.stage_of] == exp.stage_of
    assert [spec.job_tuples(r) for r in range(3)] == [exp.job_tuples(r) for r in range(3)]
    assert [r.priority for r in spec.rules] == [1, -1]  # pp - lambda, evaluated
    assert (spec.pp, spec.vpp, spec.microbatches) == (3, 2, 4)
    with pytest.raises(ValueError, match="at most three chunks"):
        module.build_plan("main", "startup", pp=2, vpp=4, microbatches=4)  # checked before the runtime is touched


def test_a_plan_imports_and_runs_without_paddle(in_repo):
    """`paddle` is imported only inside build_plan: with it made unimportable, the rest works."""
    code = f"""
import importlib.util, sys
sys.modules["paddle"] = None  # `import paddle` now raises ImportError, as if it were not installed
spec = importlib.util.spec_from_file_location("plan", {str(PLANS / "plan_vpp.py")!r})
plan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plan)
assert plan.job_list(0, 4, 2, 8)[0] == ("recv_forward", 0, 0)
assert plan.stream_rules(4, 2, 8)[0]["priority"] == 0
del sys.modules["paddle"]
assert not any(name == "paddle" or name.startswith(("paddle.", "ppdsl")) for name in sys.modules), "imported"
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------------- names and literals


@given(st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), min_size=2, max_size=2, unique=True))
def test_readable_names_are_one_to_one_and_never_python_s(names):
    a, b = map(readable_name, names)
    assert a != b
    for name in (a, b):
        assert name.isidentifier() and not keyword.iskeyword(name) and not keyword.issoftkeyword(name)
        assert name not in dir(builtins) and name not in {"jobs", "next_mb", "job_list"}


def test_readable_names_keep_plain_names():
    assert [readable_name(n) for n in ("warmup", "chunk", "list", "jobs", "_x", "x_")] == [
        "warmup",
        "chunk",
        "list_",
        "jobs_",
        "_x_",
        "x__",
    ]


def test_py_literal_splits_only_what_does_not_fit():
    assert py_literal({"a": [1, 2]}) == '{"a": [1, 2]}'
    assert py_literal((1,)) == "(1,)"
    long = py_literal(["x" * 60, "y" * 60], head="NAME = ")
    assert long == '[\n    "' + "x" * 60 + '",\n    "' + "y" * 60 + '",\n]'


def test_expressions_keep_only_the_parentheses_they_need(tmp_path, monkeypatch):
    src = "order { let a = (pp - 1) - (vpp - 1) let b = -(pp * 2) + (microbatches // 2) % 3 forward * max(0, a + b) }"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "e.sched").write_text(src)
    text = generate_plan_module(resolve_text(src, "e.sched"), "e.sched")
    assert "a = pp - 1 - (vpp - 1)" in text
    assert "b = -(pp * 2) + microbatches // 2 % 3" in text
    assert "max(0, a + b)" in text


# ---------------------------------------------------------------------- the command

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output + (result.stderr or "")
    return result


def test_compile_writes_plan_name_py_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = str(ROOT / "schedules" / "interleaved1f1b.sched")
    result = invoke("compile", source)
    assert result.exit_code == 0, result.stderr
    written = tmp_path / "plan_interleaved1f1b.py"
    assert written.read_text() == generate_plan_module(load(source), source)
    assert "wrote plan_interleaved1f1b.py" in result.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["plan_interleaved1f1b.py"]  # no temporary file left


def test_compile_literal_and_checked_sizes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("compile", "1f1b", "--pp", "4", "-m", "8", "--literal", "-o", "lit.py")
    assert result.exit_code == 0, result.stderr
    assert "_LITERAL_ORDERS" in (tmp_path / "lit.py").read_text()
    # sizes without --literal: checked, then compiled as loops
    assert invoke("compile", "zbh1", "--pp", "4", "-m", "8", "-o", "zbh1.py").exit_code == 0
    assert "for _ in range(" in (tmp_path / "zbh1.py").read_text()


def test_compile_to_stdout(in_repo):
    result = invoke("compile", "schedules/fthenb.sched", "-o", "-")
    assert result.exit_code == 0 and result.stdout == plan_text("fthenb")


def test_compile_usage_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("compile", "1f1b", "--literal")
    assert result.exit_code == 2 and "error[E007]: `--literal` compiles for given sizes" in result.stderr
    assert invoke("compile", "1f1b", "--pp", "4").exit_code == 2
    # before: `--dp 2` without sizes was dropped without a word (the module is the same at every degree)
    dp_alone = invoke("compile", "1f1b", "--dp", "2")
    assert dp_alone.exit_code == 2 and "error[E007]: `--dp` is checked with the sizes" in dp_alone.stderr
    assert list(tmp_path.iterdir()) == []


def test_compile_fails_cleanly_and_keeps_an_existing_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.sched").write_text("order { forwad }")
    (tmp_path / "plan.py").write_text("old")
    result = invoke("compile", "bad.sched", "-o", "plan.py")
    assert result.exit_code == 2 and "error[E002]: unknown job type `forwad`" in result.stderr
    # sizes the checker rejects: exit 1 with its diagnostic, nothing written
    result = invoke("compile", "vpp", "--pp", "4", "-m", "6", "--vpp", "2", "-o", "plan.py")
    assert result.exit_code == 1 and "error[S105]: deadlock" in result.stderr
    result = invoke("compile", "1f1b", "--pp", "4", "-m", "2", "--literal", "-o", "plan.py")
    assert result.exit_code == 1 and "error[S100]" in result.stderr
    assert (tmp_path / "plan.py").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.sched", "plan.py"]


def test_compile_writes_atomically(tmp_path, monkeypatch):
    """The text goes to a temporary file renamed over the target: a failed rename leaves the old file alone."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.py").write_text("old")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    monkeypatch.setattr(os, "rename", lambda *args, **kwargs: refuse(*args[:2]))  # the writer's renameat
    result = invoke("compile", "1f1b", "-o", "plan.py")
    assert result.exit_code == 2 and "cannot write `plan.py`: No space left on device" in result.stderr
    assert (tmp_path / "plan.py").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.py"]


def test_every_plan_name_is_a_module_name(in_repo):
    for stem in LIBRARY:
        assert module_stem(load(f"schedules/{stem}.sched").name) == stem
    assert module_stem("ZB-H1") == "zb_h1"
    assert [module_stem(n) for n in ("1F1B", "a b", "", "Ünï")] == ["1f1b", "a_b", "schedule", "_n_"]
    assert all(f"plan_{module_stem(n)}".isidentifier() for n in ("1F1B", "a b", "", "Ünï"))


def test_the_readme_excerpt_is_the_golden_plan():
    readme = (ROOT / "README.md").read_text()
    excerpt = readme.split("From `plan_1f1b.py`:\n\n```python\n", 1)[1].split("\n    ...\n```", 1)[0]
    assert excerpt in (PLANS / "plan_1f1b.py").read_text()


def test_a_placement_that_reads_microbatches_gets_it(tmp_path, monkeypatch):
    src = "placement stage = (rank + microbatches - microbatches) + chunk * pp\norder { forward backward optimizer }"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.sched").write_text(src)
    (tmp_path / "plan_p.py").write_text(generate_plan_module(load("p.sched"), "p.sched"))
    module = import_plan(tmp_path / "plan_p.py")
    assert module.PLACEMENT == "expr"
    assert module.stage_of(1, 1, 2, 2, microbatches=3) == 3
    fake = types.ModuleType("ppdsl.runtime.plan")
    fake.build_plan = lambda main, startup, spec, **kwargs: types.SimpleNamespace(plan=spec.stage_of)
    monkeypatch.setitem(sys.modules, "ppdsl.runtime.plan", fake)
    stage_of = module.build_plan(None, None, pp=2, vpp=2, microbatches=1)
    assert [list(row) for row in stage_of] == expand(load("p.sched"), 2, 1, 2).stage_of
    assert_ruff_clean(tmp_path / "plan_p.py")


# ---------------------------------------------------------------------- random order bodies

NAMES = ("x", "list", "jobs", "_y", "z_", "chunk", "c")
JOBS = ("forward", "backward", "backward_b", "backward_w", "F", "I", "W")


@st.composite
def expressions(draw, scope: tuple[str, ...], depth: int = 2) -> str:
    atoms = st.one_of(st.integers(0, 3).map(str), st.sampled_from(scope))
    if depth == 0:
        return draw(atoms)
    sub = expressions(scope, depth - 1)
    kind = draw(st.sampled_from(("atom", "atom", "bin", "bin", "cmp", "neg", "cond", "call")))
    if kind == "atom":
        return draw(atoms)
    if kind == "bin":
        return f"({draw(sub)} {draw(st.sampled_from(['+', '-', '*', '//', '%']))} {draw(sub)})"
    if kind == "cmp":
        test = f"{draw(sub)} {draw(st.sampled_from(['<', '<=', '==', '!=']))} {draw(sub)}"
        return f"({test} {draw(st.sampled_from(['and', 'or']))} not {draw(sub)} > 1)"
    if kind == "neg":
        return f"-{draw(sub)}"
    if kind == "cond":
        return f"(if {draw(sub)} > 1 then {draw(sub)} else {draw(sub)})"
    return f"{draw(st.sampled_from(['min', 'max', 'ceildiv']))}({draw(sub)}, {draw(sub)})"


@st.composite
def bodies(draw, scope: tuple[str, ...], depth: int = 2) -> str:
    """A block of statements over `scope`; names bound inside a nested block are not visible after it."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("job", "job", "let", "repeat", "for", "if") if depth else ("job", "let")))
        small = expressions(scope, 1)
        if kind == "job":
            args = []
            if draw(st.booleans()):
                args.append(f"chunk = {draw(small)}")
            if draw(st.booleans()):
                args.append(f"mb = {draw(small)}")
            job = draw(st.sampled_from(JOBS)) + (f"({', '.join(args)})" if args else "")
            out.append(job + (f" * {draw(st.integers(0, 2))}" if draw(st.booleans()) else ""))
        elif kind == "let":
            name = draw(st.sampled_from(NAMES))
            out.append(f"let {name} = {draw(expressions(scope))}")
            scope = (*scope, name) if name not in scope else scope
        elif kind == "repeat":
            out.append(f"repeat {draw(small)} {{ {draw(bodies(scope, depth - 1))} }}")
        elif kind == "for":
            name = draw(st.sampled_from(NAMES))
            inner = (*scope, name) if name not in scope else scope
            out.append(f"for {name} in {draw(small)} .. {draw(small)} {{ {draw(bodies(inner, depth - 1))} }}")
        else:
            orelse = f" else {{ {draw(bodies(scope, depth - 1))} }}" if draw(st.booleans()) else ""
            out.append(f"if {draw(expressions(scope))} {{ {draw(bodies(scope, depth - 1))} }}{orelse}")
    return " ".join(out)


@pytest.mark.e2e
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(bodies(("pp", "vpp", "microbatches", "rank")))
def test_random_orders_compile_to_what_expand_runs(body):
    """The readable backend against the fast one on random order bodies: same jobs, or both fail."""
    source = f"order {{ {body} optimizer }}"
    try:
        defn = resolve_text(source, "random.sched")
    except DiagnosticError:  # e.g. `let chunk` where the chunk must be an integer; not this test's subject
        return
    text = generate_plan_module(defn, "random.sched")
    module = types.ModuleType("plan_random")
    exec(compile(text, "plan_random.py", "exec"), module.__dict__)
    for pp, vpp, m in ((1, 1, 1), (2, 2, 3), (3, 1, 2), (2, 3, 4)):
        try:
            exp = expand(defn, pp, m, vpp)
        except DiagnosticError:
            exp = None
        outcomes = []
        for r in range(pp):
            try:
                outcomes.append(module.job_list(r, pp, vpp, m))
            except (ValueError, ArithmeticError) as err:
                outcomes.append(err)
        if exp is None:
            assert any(isinstance(o, Exception) for o in outcomes), (source, pp, vpp, m)
        else:
            assert outcomes == [exp.job_tuples(r) for r in range(pp)], (source, pp, vpp, m)
