"""A plan carries paths and user text only escaped: compiled from folders whose names hold code (after a newline, a
`\"\"\"`, a line separator...), directly or through an `include` that is a symlink into such a folder, the plan
compiles, imports and runs without running any of it; and every golden plan is Python.

`python -m pytest tests/codegen --update-golden` rewrites the goldens; none of them changes with these fixes.
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

from paths import CODEGEN, GOLDEN

MARKER = "ppdsl_payload_ran"
# No `/` in it: it goes into a folder's name. It writes the marker into the working directory (tmp_path).
PAYLOAD = f"open({MARKER!r}, 'w').write('ran')"
HOSTILE_NAMES = {
    "newline": f"a\n{PAYLOAD}\n#",
    "newline-indented": f"a\n    {PAYLOAD}\n    #",
    "newline-in-block": f"a\n        {PAYLOAD}\n        #",
    "carriage-return": f"a\r{PAYLOAD}\r#",
    "docstring-end": f'a"""\n{PAYLOAD}\n"""',
    "docstring-end-last": 'a"',
    "single-quote-docstring": f"a'''\n{PAYLOAD}\n'''",
    "quotes": "a\"b'c",
    "backslashes": "a\\x\\N\\",
    "hash": "# a",
    "line-separators": f"a\u2028{PAYLOAD}\u2029#\u0085b",
    "controls": "a\x1b[31m\x0b\x0c\x7fb",
    "bidi-override": "a\u202e\u2066b",
}
SCHEDULES = ("features.sched", "functions.sched")  # an include, rules, requires, fns, placement: every location
COMMENTS = (  # a schedule's own comments, which the plan quotes beside the code they explain
    'schedule "Comments"\n'
    f"# above the order\u2028{PAYLOAD}\x1b\u202e\n"
    "order {\n"
    f"    forward * microbatches  # end of line\u2029{PAYLOAD}\r\n"
    f"    # above backward \u0085{PAYLOAD}\n"
    "    backward * microbatches\n"
    "    optimizer\n"
    "}\n"
)
runner = CliRunner()


def _compile_and_run(source: Path, out: Path) -> types.ModuleType:
    """`ppdsl compile source -o out` (the path as a user gives it), then import the plan and call what runs
    without Paddle: every function `build_plan` calls before the runtime, and the messages of the checks."""
    result = runner.invoke(app, ["compile", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    compile(text, str(out), "exec")
    assert all(line.isprintable() for line in text.splitlines()), "a raw control or format character in the plan"
    spec = importlib.util.spec_from_file_location(f"hostile_plan_{out.stem}", out)
    plan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plan)
    assert plan.SOURCE == str(source)  # the data is the path itself, not an escaped copy
    pp, vpp, mb = 2, 2, 4
    for rank in range(pp):
        assert plan.job_list(rank, pp, vpp, mb)
        assert [plan.stage_of(rank, c, pp, vpp) for c in range(vpp)]
    plan.stream_rules(pp, vpp, mb)
    plan.check_requires(pp, vpp, mb)
    for value in vars(plan).values():
        if isinstance(value, types.FunctionType):
            assert value.__doc__ is None or isinstance(value.__doc__, str)
    with pytest.raises(ValueError):  # messages carry locations: they are built without running anything
        plan.job_list(pp, pp, vpp, mb)
    return plan


def _copy_schedules(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name in (*SCHEDULES, "common.sched"):
        shutil.copy(CODEGEN / name, folder / name)
    (folder / "comments.sched").write_text(COMMENTS, encoding="utf-8")


@pytest.mark.parametrize("label", HOSTILE_NAMES)
def test_a_plan_from_a_hostile_folder_compiles_and_runs_none_of_its_name(label, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / HOSTILE_NAMES[label]
    _copy_schedules(folder)
    for i, name in enumerate((*SCHEDULES, "comments.sched")):
        _compile_and_run(folder / name, tmp_path / f"plan_{i}.py")
        assert not (tmp_path / MARKER).exists(), f"{name}: the folder's name ran as code"


INCLUDED = (  # what an included file can hold that the plan locates: a require, a function, a rule's priority
    'job recv_forward : forward ops "pd_op.recv_v2" before forward receives\n'
    'require pp >= 1 : "one rank at least"\n'
    "fn half(n) = n // 2\n"
    'rule "pd_op.send_v2" { priority = half(pp) }\n'
)
INCLUDING = 'schedule "Main"\ninclude "lib.sched"\norder {\n    forward * microbatches\n    backward * half(2 * microbatches)\n    optimizer\n}\n'


@pytest.mark.parametrize("label", HOSTILE_NAMES)
def test_an_include_that_is_a_symlink_into_a_hostile_folder_runs_none_of_its_name(label, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hostile, plain = tmp_path / HOSTILE_NAMES[label], tmp_path / "plain"
    hostile.mkdir()
    plain.mkdir()
    (hostile / "lib.sched").write_text(INCLUDED, encoding="utf-8")
    (plain / "main.sched").write_text(INCLUDING, encoding="utf-8")
    (plain / "lib.sched").symlink_to(hostile / "lib.sched")
    plan = _compile_and_run(plain / "main.sched", tmp_path / "plan_main.py")
    assert not (tmp_path / MARKER).exists()
    # the included file is named by where the link leads, relative to the schedule's folder, as data
    assert [Path(p).parent.name for p in plan.INCLUDED_SHA256] == [HOSTILE_NAMES[label]]


def test_compile_refuses_a_nul_byte_with_exit_2_and_writes_nothing(tmp_path):
    source = tmp_path / "nul.sched"
    source.write_bytes(b"order { forward  # a\0b\n optimizer }\n")
    result = runner.invoke(app, ["compile", str(source), "-o", str(tmp_path / "plan.py")])
    assert result.exit_code == 2
    assert "NUL byte" in result.output
    assert not (tmp_path / "plan.py").exists()


@pytest.mark.parametrize("golden_plan", sorted((GOLDEN / "plans").glob("*.py")), ids=lambda p: p.stem)
def test_every_golden_plan_is_python(golden_plan):
    ast.parse(golden_plan.read_text(encoding="utf-8"), str(golden_plan))
