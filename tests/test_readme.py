"""The README's examples stay true (issue 19): each `$ ppdsl ...` in its text blocks that runs quickly and gives
the same output every time is run, at 120 columns, and every line the README shows must appear in its output, in
order. A line ending in `...` stands for any line that starts with what comes before it; a line `...` alone
for lines left out. Commands that time themselves (`run`, `synth`) or need another machine are not run here."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

from doc_examples import blocks, examples, matches
from paths import ROOT

runner = CliRunner()
COLUMNS = 120
RUN_HERE = ("check", "compare", "plot", "compile", "list", "expand", "explain")


def _examples() -> list[tuple[int, str, list[str]]]:
    """(line number, command, the output lines shown after it) of every `$ ` line in the README's text blocks."""
    return [(e.line, e.command, e.shown) for e in examples(blocks(ROOT / "README.md"))]


def _runnable() -> list[tuple[int, str, list[str]]]:
    """The examples run here: fast, deterministic commands, and none that reads what a skipped one writes."""
    out, written = [], set()
    for example in _examples():
        words = shlex.split(example[1])
        reads_written = any(w in written for w in words)
        written |= {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", "--output")}
        if words[0] == "ppdsl" and words[1] in RUN_HERE and not reads_written:
            out.append(example)
    return out


EXAMPLES = _runnable()


def test_the_readme_has_examples_to_run():
    assert len(EXAMPLES) >= 5, [e[1] for e in EXAMPLES]


@pytest.mark.parametrize(("number", "command", "shown"), EXAMPLES, ids=[f"README.md:{e[0]}" for e in EXAMPLES])
def test_readme_example_output_is_what_the_command_prints(number, command, shown, in_repo, tmp_path):
    args = shlex.split(command)[1:]
    written = {}
    for i, arg in enumerate(args[:-1]):  # outputs go to a scratch folder, not over the repository's files
        if arg in ("-o", "--output") and args[i + 1] != "-":
            written[args[i + 1]] = str(tmp_path / Path(args[i + 1]).name)
            args[i + 1] = written[args[i + 1]]
    if args[0] == "compile" and "-o" not in args:
        args += ["-o", str(tmp_path / f"plan_{args[1]}.py")]
        written[f"plan_{args[1]}.py"] = args[-1]
    result = runner.invoke(app, args, env={"COLUMNS": str(COLUMNS)})
    text = result.stdout + result.stderr
    for shown_name, real in written.items():
        text = text.replace(real, shown_name)
    assert "Traceback" not in text
    missing = matches(shown, text)
    assert missing is None, f"README.md:{number}: `{command}` no longer prints\n  {missing}\nit prints:\n{text}"
