"""Issue 15, on the command line: bad numbers in flags, cost files and CSVs are E-code errors (exit 2) naming
what is wrong and the range, never a traceback; user text prints verbatim (no rich markup or emoji codes, in
JSON too) with control characters escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ppdsl
from ppdsl.cli import app

runner = CliRunner()
ORDER = "order { forward * microbatches  backward * microbatches  optimizer }\n"


def invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output + result.stderr
    return result


# (command and its required arguments, flag, bad value, the message): every numeric flag of every command but
# `run`'s training flags
SIZES = ["--pp", "2", "-m", "2"]
FLAGS = [
    (["check", "1f1b", *SIZES], "--pp", "0", "`--pp` must be an integer from 1 to 1048576, got 0"),
    (["check", "1f1b", *SIZES], "-m", "-3", "`--microbatches` must be an integer from 1 to 1048576, got -3"),
    (["check", "1f1b", *SIZES], "--vpp", str(2**21), "`--vpp` must be an integer from 1 to 1048576, got 2097152"),
    (["check", "1f1b", *SIZES], "--max-jobs", "0", "`--max-jobs` must be an integer from 1 to 1099511627776"),
    (["check", "1f1b", *SIZES], "--batch-size", "0", "`--batch-size` must be an integer from 1 to 2147483647"),
    (["check", "1f1b", *SIZES], "--memory-limit", "1e999", "memory size `1e999` is too large"),
    (["expand", "1f1b", *SIZES], "--pp", "0", "`--pp` must be an integer from 1"),
    (["show", "1f1b", *SIZES], "--block", "0", "`--block` must be an integer from 1 to 10000, got 0"),
    (["trace", "1f1b", *SIZES], "--vpp", "0", "`--vpp` must be an integer from 1"),
    (["plot", "1f1b", *SIZES, "-o", "x.png"], "--dpi", "0", "`--dpi` must be an integer from 10 to 600, got 0"),
    (["plot", "1f1b", *SIZES, "-o", "x.png"], "--dpi", "-5", "`--dpi` must be an integer from 10 to 600, got -5"),
    (["plot", "1f1b", *SIZES, "-o", "x.png"], "--dpi", "100000", "`--dpi` must be an integer from 10 to 600"),
    (["plot", "1f1b", *SIZES, "-o", "x.png"], "--dpi", "nan", "Invalid value for '--dpi'"),  # (typer's own)
    (["plot", "1f1b", *SIZES, "-o", "x.png"], "--dpi", "1e9", "Invalid value for '--dpi'"),
    (["compare", *SIZES, "1f1b"], "--vpp", "0", "`--vpp` must be an integer from 1"),
    (["compare", *SIZES, "1f1b"], "--time-limit", "nan", "`--time-limit` must be a number from 0.01 to 1000000"),
    (["compare", *SIZES, "1f1b"], "--time-limit", "inf", "`--time-limit` must be a number from 0.01 to 1000000"),
    (["sweep", "1f1b", "-m", "2", "--pp", "2"], "--pp", "9" * 5000, "bad --pp `999999999999999999999999999999"),
    (["sweep", "1f1b", "--pp", "2", "-m", "2"], "-m", "1..100000000", "sizes go up to 1048576"),
    (["synth", *SIZES, "-o", "s.sched"], "--time-limit", "nan", "`--time-limit` must be a number from 0.01"),
    (["synth", *SIZES, "-o", "s.sched"], "--backward-b-frees", "nan", "`--backward-b-frees` must be a number"),
    (["synth", *SIZES, "-o", "s.sched"], "--seed", "-1", "`--seed` must be an integer from 0 to 2147483647"),
    (["synth", *SIZES, "-o", "s.sched"], "--workers", "1000", "`--workers` must be an integer from 1 to 256"),
    (["compile", "1f1b", *SIZES], "--pp", "0", "`--pp` must be an integer from 1"),
]


@pytest.mark.parametrize(
    ("command", "flag", "value", "message"), FLAGS, ids=[f"{c[0]} {f} {v[:12]}" for c, f, v, _ in FLAGS]
)
def test_a_numeric_flag_out_of_range_is_a_usage_error(command, flag, value, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = list(command)
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert not (tmp_path / "x.png").exists() and not (tmp_path / "s.sched").exists()


@pytest.mark.parametrize("command", ["check", "trace", "plot", "compare", "sweep", "synth"])
def test_every_command_that_takes_costs_refuses_a_bad_cost_file(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.json").write_text('{"costs": {"forwrd": 2}}', encoding="utf-8")
    args = {
        "check": ["check", "1f1b", *SIZES],
        "trace": ["trace", "1f1b", *SIZES],
        "plot": ["plot", "1f1b", *SIZES, "-o", "x.png"],
        "compare": ["compare", *SIZES, "1f1b"],
        "sweep": ["sweep", "1f1b", *SIZES],
        "synth": ["synth", *SIZES, "-o", "s.sched", "--time-limit", "0.1"],
    }[command]
    result = invoke(*args, "--costs", "c.json")
    assert result.exit_code == 2
    assert "error[E008]: the cost file's `costs.forwrd` names no job type of the schedule" in result.stderr
    assert "did you mean `forward`?" in result.stderr


@pytest.mark.parametrize("cost", ["forward=nan", "forward=inf", "forward=-1", "latency=nan"])
def test_a_cost_that_is_not_a_number_is_not_reported_as_ok(cost):
    """These printed `ok ... makespan nan` (or `bubble 400%`) and exited 0."""
    result = invoke("check", "1f1b", *SIZES, "--cost", cost)
    assert result.exit_code == 2 and "error[E007]: bad cost" in result.stderr and "ok:" not in result.stdout


def test_a_negative_cost_declaration_is_located(tmp_path):
    path = tmp_path / "neg.sched"
    path.write_text("cost forward = 1 - rank\n" + ORDER, encoding="utf-8")
    result = invoke("check", str(path), "--pp", "3", "-m", "2")
    assert result.exit_code == 2
    assert "error[E075]: the cost of `forward` is negative (-1) at rank 2" in result.stderr
    assert f"--> {path}:1:1" in result.stderr


def test_emoji_codes_and_markup_print_verbatim_in_text_and_json(tmp_path):
    """`a:x:b` used to print as `a❌b`, in `--format json` too; `[bold]` disappeared."""
    name = "a:x:b [bold]z[/bold] :thumbs_up:"
    path = tmp_path / "emoji.sched"
    path.write_text(f'schedule "{name}"\n' + ORDER, encoding="utf-8")
    text = invoke("check", str(path), *SIZES)
    assert text.exit_code == 0 and f"`{name}` is complete" in text.stdout
    report = invoke("check", str(path), *SIZES, "--format", "json")
    assert json.loads(report.stdout)["schedule"] == name
    listed = invoke("show", str(path), *SIZES)
    assert listed.stdout.startswith(name)


def test_direction_overrides_in_user_text_are_escaped(tmp_path):
    path = tmp_path / "bidi.sched"
    path.write_text('schedule "x\u202ey"\norder { forward * microbatches  b\u2066ogus }\n', encoding="utf-8")
    result = invoke("check", str(path), *SIZES)
    assert result.exit_code == 2
    assert "\u202e" not in result.output + result.stderr and "\u2066" not in result.stderr
    assert "b\\u2066ogus" in result.stderr
    ok = tmp_path / "ok.sched"
    ok.write_text('schedule "x\u202ey"\n' + ORDER, encoding="utf-8")
    assert "`x\\u202ey` is complete" in invoke("check", str(ok), *SIZES).stdout
    assert invoke("show", str(ok), *SIZES).stdout.startswith("x\\u202ey  pp=2")


def test_a_5000_digit_number_in_a_csv_is_an_import_error(tmp_path):
    """Python's int-string limit used to raise ValueError out of `ppdsl import`."""
    for cell in ("0F" + "9" * 5000, "9" * 5000 + "F0"):
        path = tmp_path / "big.csv"
        path.write_text(f"{cell}\n1F0\n", encoding="utf-8")
        result = invoke("import", str(path))
        assert result.exit_code == 2
        assert "error[E020]: row 1, column 1:" in result.stderr
        assert "has a number too large for a stage or a micro-batch" in result.stderr
        assert max(len(line) for line in result.stderr.split("\n")) < 250  # the line is quoted as a window


def test_a_csv_with_a_byte_order_mark_imports(tmp_path):
    """Spreadsheets write a BOM first; it used to make the first cell `\\ufeff0F0`, not a compute action."""
    path = tmp_path / "bom.csv"
    path.write_text("\ufeff0F0,0B0\n1F0,1B0\n", encoding="utf-8")
    result = invoke("import", str(path), "-o", str(tmp_path / "bom.sched"))
    assert result.exit_code == 0, result.stderr
    assert invoke("check", str(tmp_path / "bom.sched"), "--pp", "2", "-m", "1").exit_code == 0


@pytest.mark.e2e
def test_a_sweep_of_too_many_sizes_is_refused_up_front():
    result = invoke("sweep", "1f1b", "--pp", "1..4096:1", "-m", "1..4096:1")
    assert result.exit_code == 2
    # refused by the count of sizes or by the sweep's job budget (E068), whichever is checked first: both name it
    assert "16,777,216" in result.stderr and "Traceback" not in result.output


def test_every_console_comes_from_the_factory_and_no_line_is_split_by_splitlines():
    """One place decides how user text prints (no markup, no emoji codes), and one notion of a line (Lark's)."""
    package = Path(ppdsl.__file__).parent
    consoles = [p for p in package.rglob("*.py") if "Console(" in p.read_text(encoding="utf-8")]
    assert [p.relative_to(package).as_posix() for p in consoles] == ["cli/common.py"]
    split = [p for p in package.rglob("*.py") if ".splitlines(" in p.read_text(encoding="utf-8")]
    assert split == []


def test_a_deeply_nested_profile_is_refused_not_a_recursion_error(tmp_path):
    """`plot --measured` (and `calibrate`) read profiles with plain json.loads, which recursed without bound."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    result = invoke("plot", "1f1b", "--pp", "2", "-m", "2", "--measured", str(deep), "-o", str(tmp_path / "x.png"))
    assert result.exit_code == 2, result.output
    assert "error[E009]" in result.stderr and "nested 100000 levels deep" in result.stderr
    assert "RecursionError" not in result.output and not (tmp_path / "x.png").exists()
