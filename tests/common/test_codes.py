"""The diagnostic code registry: every code raised is registered and explained, every example does what it says,
and the docs' table of codes is the registry's."""

from __future__ import annotations

import re
import shlex

import click
import pytest
import typer
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.common.codes import REGISTRY, exit_code, explain, lookup, markdown_table
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.explanations import EXPLANATIONS, Example

from paths import ROOT

PACKAGE = ROOT / "ppdsl"
# A code as the package writes it: a string literal such as "E010" or 'S105'.
CODE_LITERAL = re.compile(r"""["']([A-Z]\d{3})["']""")
REGISTRY_MODULES = {PACKAGE / "common" / "codes.py", *(PACKAGE / "common" / "explanations").glob("*.py")}
DOCS = ROOT / "docs" / "language.md"
DOCS_TABLE = re.compile(r"(<!-- codes:[^\n]*-->\n)(.*?)(\n<!-- end of codes -->)", re.DOTALL)

runner = CliRunner()


def raised_codes() -> dict[str, set[str]]:
    """code -> the modules (outside the registry) that write it."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in REGISTRY_MODULES:
            continue
        for code in CODE_LITERAL.findall(path.read_text(encoding="utf-8")):
            found.setdefault(code, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_scan_finds_codes_where_they_are_raised():
    found = raised_codes()
    assert "ppdsl/language/parser.py" in found["E001"]
    assert "ppdsl/analysis/check.py" in found["S105"]


def test_every_code_raised_is_registered_and_explained():
    for code, modules in raised_codes().items():
        assert code in REGISTRY, f"{code} (raised in {sorted(modules)}) is not in ppdsl/common/codes.py"
        text = REGISTRY[code].explanation
        assert text.text and text.wrong.commands and text.fixed.commands, code


def test_every_registered_code_is_raised_somewhere():
    """No dead entries: a code nothing reports would document a message nobody sees."""
    unused = set(REGISTRY) - set(raised_codes())
    assert not unused, f"registered but never raised: {sorted(unused)}"


def test_registry_and_explanations_hold_the_same_codes():
    assert set(EXPLANATIONS) == set(REGISTRY)


def test_explanations_are_in_code_order():
    """`ppdsl explain` and the docs list codes in order (when the texts shared one file, branches that each added
    codes at the end left them out of order once: E090 before E044)."""
    assert list(EXPLANATIONS) == sorted(EXPLANATIONS)


def test_each_explanation_is_the_file_named_by_its_code():
    files = sorted(path.stem for path in (PACKAGE / "common" / "explanations").glob("[ES][0-9][0-9][0-9].py"))
    assert files == list(EXPLANATIONS) and len(files) > 90


def test_exit_status_comes_from_the_code_class():
    assert exit_code([]) == 0
    assert exit_code([Diagnostic("S105", "deadlock")]) == 1
    assert exit_code([Diagnostic("S105", "deadlock"), Diagnostic("E001", "syntax")]) == 2
    assert {c.exit_status for c in REGISTRY.values() if c.code.startswith("E")} == {2}
    assert {c.exit_status for c in REGISTRY.values() if c.code.startswith("S")} == {1}


def _run(example: Example, tmp_path, monkeypatch):
    """Write the example's files, run its commands in order; the result of the last."""
    monkeypatch.chdir(tmp_path)
    for name, content in example.files:
        (tmp_path / name).write_text(content, encoding="utf-8")
    result = None
    for command in example.commands:
        words = shlex.split(command)
        assert words[0] == "ppdsl", f"an example that runs without paddle is a ppdsl command: {command}"
        result = runner.invoke(app, words[1:])
        assert "Traceback" not in result.output + (result.stderr or "")
    return result


OFFLINE = sorted(code for code, text in EXPLANATIONS.items() if text.wrong.runs_anywhere)
OFFLINE_FIXED = sorted(code for code, text in EXPLANATIONS.items() if text.fixed.runs_anywhere)


@pytest.mark.parametrize("code", OFFLINE)
def test_wrong_example_reports_its_code(code, tmp_path, monkeypatch):
    result = _run(EXPLANATIONS[code].wrong, tmp_path, monkeypatch)
    assert f"error[{code}]" in result.stderr, result.stderr
    assert result.exit_code == REGISTRY[code].exit_status


@pytest.mark.parametrize("code", OFFLINE_FIXED)
def test_fixed_example_does_not(code, tmp_path, monkeypatch):
    result = _run(EXPLANATIONS[code].fixed, tmp_path, monkeypatch)
    assert f"error[{code}]" not in result.stderr, result.stderr
    assert result.exit_code == 0, result.stderr


def test_every_schedule_code_has_a_schedule_example():
    """A code that a `.sched` file and sizes produce is shown as a `.sched` file checked with `ppdsl check`."""
    from_a_file = {f"E00{i}" for i in range(1, 7)} | {f"E01{i}" for i in range(5)}
    raised = raised_codes()
    for code in REGISTRY:
        by_the_checker = any(m.startswith(("ppdsl/language/", "ppdsl/analysis/")) for m in raised[code])
        if (code.startswith("S") and by_the_checker) or code in from_a_file:
            for example in (EXPLANATIONS[code].wrong, EXPLANATIONS[code].fixed):
                assert example.sched is not None, code
                assert example.commands[-1].startswith("ppdsl check example.sched"), code


def _parses(command: str) -> None:
    """The command is one of ppdsl's, with options it takes (it is not run here)."""
    words = shlex.split(command)
    group = typer.main.get_command(app)
    sub = group.get_command(click.Context(group), words[1])
    assert sub is not None, f"no command `{words[1]}`"
    sub.make_context(words[1], words[2:])


@pytest.mark.parametrize(
    "code", sorted(c for c, t in EXPLANATIONS.items() if not t.wrong.runs_anywhere or not t.fixed.runs_anywhere)
)
def test_examples_not_run_here_are_valid_command_lines(code):
    for example in (EXPLANATIONS[code].wrong, EXPLANATIONS[code].fixed):
        for command in example.commands:
            if command.startswith("ppdsl "):
                _parses(command)


def test_explain_prints_meaning_and_both_examples():
    result = runner.invoke(app, ["explain", "e010"])
    assert result.exit_code == 0
    text = EXPLANATIONS["E010"]
    assert result.stdout.startswith(f"E010: {REGISTRY['E010'].summary} (exit status 2)")
    wrong, fixed = result.stdout.split("Wrong:")[1].split("Fixed:")
    assert "microbatches / 2" in wrong and "microbatches / 2" not in fixed
    assert text.wrong.commands[0] in wrong and text.fixed.commands[0] in fixed
    assert result.stdout == explain(lookup("E010"))


def test_explain_lists_codes_and_refuses_unknown_ones():
    listing = runner.invoke(app, ["explain"])
    assert listing.exit_code == 0
    assert [line.split()[0] for line in listing.stdout.splitlines()] == list(REGISTRY)
    unknown = runner.invoke(app, ["explain", "E999"])
    assert unknown.exit_code == 2
    assert "error[E007]: unknown diagnostic code `E999`" in unknown.stderr


def test_docs_table_is_the_registry(request):
    text = DOCS.read_text(encoding="utf-8")
    match = DOCS_TABLE.search(text)
    assert match, "docs/language.md lost its `<!-- codes: ... -->` table markers"
    if request.config.getoption("--update-golden"):
        DOCS.write_text(text[: match.start(2)] + markdown_table() + text[match.end(2) :], encoding="utf-8")
        return
    assert match.group(2) == markdown_table(), "docs/language.md's codes differ (pytest --update-golden rewrites them)"
