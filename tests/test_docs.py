"""Every example of docs/*.md runs as written (issue 26), and so do the README's commands that tests/test_readme.py
leaves out (those that train, search or start processes).

What an example is (`doc_examples`): a `$ ppdsl ...` (or `$ torchrun ...`) line of a ```` ```text ```` block (or
`console`, `sh`), with the output shown after it; a ```` ```sched ```` block, a schedule or a part of one; a block with a file name after its language
(```` ```sched half.sched ````, ```` ```json costs.json ````), a file the commands of its page read.

- Each command runs in a scratch directory holding its page's named files (and what the earlier commands it reads
  wrote, `-o`), at 120 columns. It exits 0, or, when the output shown is an `error[CODE]`, with that code's exit
  status; it never prints a traceback; and every line shown appears in what it prints, in order. A command that
  times itself (`run`, `synth`) is held to its exit status only; what several processes print (`torchrun`), to its
  lines in any order, rounding noise (below NOISE) as any other.
- What trains, searches or starts processes (`ppdsl run` but `--dry-run`, `ppdsl synth`, `torchrun`), and what reads
  a file one of those writes, is marked `e2e` (`pytest -m e2e`) and runs as written there; the rest runs in the quick
  suite. A command for another machine (`--master` without `--dry-run`) is never run.
- Each sched block parses; one that is a whole schedule (an `order` or a `table`) and that no command reads is
  checked, at the sizes of its `# ppdsl:` line (`--pp 4 -m 8` without one), and must be ok.
- No code block shows a `ppdsl` command in another form (without `$ `), which this test would not run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.common.codes import lookup
from ppdsl.language import ast
from ppdsl.language.parser import parse

from doc_examples import COMMAND_LANGS, Block, Example, blocks, examples, matches
from paths import ROOT

COLUMNS = 120
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
# what tests/test_readme.py runs of the README, and compares whole (its RUN_HERE)
README_RUN_ELSEWHERE = ("check", "compare", "plot", "compile", "list", "expand", "explain")
TIMED = ("run", "synth")  # their output holds times: held to their exit status
NOISE = 1e-6  # a difference the docs show below it is rounding noise: any other below it matches
_FLOAT = re.compile(r"-?\d+(?:\.\d+)?e[-+]?\d+")
OUTPUT_FLAGS = ("-o", "--output", "--summary-json", "--profile", "--save-dir")
PADDLE = importlib.util.find_spec("paddle") is not None

BLOCKS = {page: blocks(page) for page in PAGES}


def _label(page: Path, line: int) -> str:
    return f"{page.relative_to(ROOT)}:{line}"


def _outputs(words: list[str]) -> set[str]:
    return {words[i + 1] for i, w in enumerate(words[:-1]) if w in OUTPUT_FLAGS}


def _page_examples(page: Path) -> list[Example]:
    found = examples(BLOCKS[page])
    if page.name != "README.md":
        return found
    # the README's own test runs its quick front-end commands, and those that read nothing a skipped one wrote
    out, written = [], set()
    for e in found:
        words = e.words
        reads_written = any(w in written for w in words[1:])
        written |= _outputs(words)
        if not (words[0] == "ppdsl" and words[1] in README_RUN_ELSEWHERE and not reads_written):
            out.append(e)
    return out


EXAMPLES = [e for page in PAGES for e in _page_examples(page)]
SCHED_BLOCKS = [b for page in PAGES for b in BLOCKS[page] if b.lang == "sched"]


def _why_not_run(words: list[str]) -> str | None:
    """Why an example is not run on this machine (None: it is)."""
    if words[0] == "torchrun":
        return "torch is not installed" if importlib.util.find_spec("torch") is None else None
    if words[0] != "ppdsl":
        return None
    if "--master" in words and "--dry-run" not in words:
        return "needs another machine (`--master`)"
    needs_paddle = words[1] == "run" or "--model" in words
    if needs_paddle and not PADDLE:
        return "paddlepaddle is not installed"
    model = words[words.index("--model") + 1] if "--model" in words else "builtin"
    module = model.partition(":")[0]
    if model != "builtin" and module.split(".")[0] != "examples" and importlib.util.find_spec(module) is None:
        return f"the model's module `{module}` is not installed"
    if "examples.paddleformers_llama" in model and importlib.util.find_spec("paddleformers") is None:
        return "paddleformers is not installed"
    return None


def _slow(words: list[str]) -> bool:
    """A command that trains, searches for its time limit or starts processes: an `e2e` case."""
    if words[0] == "torchrun":
        return True
    return words[0] == "ppdsl" and (words[1] == "synth" or (words[1] == "run" and "--dry-run" not in words))


def _inputs(example: Example) -> list[Example]:
    """The earlier commands of its page that write a file `example` reads, and theirs, in order."""
    page = examples(BLOCKS[example.doc])
    read, out = set(example.words[1:]), []
    for earlier in reversed([e for e in page if e.line < example.line]):
        if _outputs(earlier.words) & read:
            out.insert(0, earlier)
            read |= set(earlier.words[1:])
    return out


def _is_e2e(example: Example) -> bool:
    return any(_slow(e.words) for e in [*_inputs(example), example])


def _expected_status(shown: list[str]) -> int:
    """The exit status the shown output means: an `error[CODE]` line's code's, else 0."""
    for line in shown:
        if line.startswith("error["):
            code = lookup(line[len("error[") : line.index("]")])
            assert code is not None, f"the docs show an unknown code: {line}"
            return code.exit_status
    return 0


def _run(words: list[str], cwd: Path) -> tuple[int, str]:
    """Run one command in `cwd`: ppdsl's front end (and a dry run) in this process; a run that trains, and other
    programs, as processes."""
    if words[0] == "ppdsl" and (words[1] != "run" or "--dry-run" in words):
        with contextlib.chdir(cwd):
            result = CliRunner().invoke(app, words[1:], env={"COLUMNS": str(COLUMNS)})
        return result.exit_code, result.stdout + result.stderr
    # this checkout first (its `examples` package too, which the README's `--model examples....` names)
    env = {**os.environ, "COLUMNS": str(COLUMNS)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    if words[0] == "ppdsl":
        argv = [sys.executable, "-c", "import sys; from ppdsl.cli import main; sys.argv[0] = 'ppdsl'; main()"]
        argv += words[1:]
    else:
        # a path the scratch directory does not hold is the repository's (`cat schedules/1f1b.sched`)
        argv = [shutil.which(words[0]) or words[0]]
        argv += [str(ROOT / a) if not (cwd / a).exists() and (ROOT / a).exists() else a for a in words[1:]]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    return proc.returncode, proc.stdout + proc.stderr


class Scratch:
    """A page's scratch directory: its named blocks as files, and the outputs of the commands run so far."""

    def __init__(self, page: Path, root: Path) -> None:
        self.page, self.dir = page, root
        root.mkdir(parents=True, exist_ok=True)
        for block in BLOCKS[page]:
            if block.name:
                (root / block.name).write_text(block.text, encoding="utf-8")
        self.done: dict[int, tuple[int, str]] = {}

    def run(self, example: Example) -> tuple[int, str]:
        """Run `example`, after the earlier commands of its page that wrote a file it reads."""
        if example.line not in self.done:
            for earlier in _inputs(example):
                why = _why_not_run(earlier.words)
                if why:
                    pytest.skip(f"reads what {_label(self.page, earlier.line)} writes, which is not run here: {why}")
                if earlier.line not in self.done:
                    self.done[earlier.line] = _run(earlier.words, self.dir)
                status, text = self.done[earlier.line]
                assert status == 0, f"{_label(self.page, earlier.line)} (read by line {example.line}) failed:\n{text}"
            self.done[example.line] = _run(example.words, self.dir)
        return self.done[example.line]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory):
    made: dict[Path, Scratch] = {}

    def of(page: Path) -> Scratch:
        if page not in made:
            made[page] = Scratch(page, tmp_path_factory.mktemp(page.stem))
        return made[page]

    return of


def test_the_docs_have_examples():
    """The reader finds them (a changed fence or prompt would silently test nothing)."""
    pages = {e.doc.name for e in EXAMPLES}
    assert {"language.md", "runtime.md", "README.md"} <= pages, pages
    assert len(SCHED_BLOCKS) >= 5, [_label(b.doc, b.line) for b in SCHED_BLOCKS]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_command_shown_is_one_this_test_runs(page):
    """A command written without `$ `, or in a block that is not `text`, would never be run here."""
    stray = []
    for block in BLOCKS[page]:
        for offset, line in enumerate(block.lines, 1):
            synopsis = "[--" in line  # a usage line (`ppdsl synth --pp P ... [--vpp V]`), not a command
            shown_bare = line.startswith(("ppdsl ", "torchrun ")) and not synopsis
            prompt_elsewhere = line.startswith("$ ") and block.lang not in COMMAND_LANGS
            if shown_bare or prompt_elsewhere:
                stray.append(f"{_label(page, block.line + offset)}: {line}")
    assert not stray, "write commands as `$ ppdsl ...` in a ```text block:\n" + "\n".join(stray)


@pytest.mark.parametrize(
    "example",
    [pytest.param(e, id=_label(e.doc, e.line), marks=[pytest.mark.e2e] if _is_e2e(e) else []) for e in EXAMPLES],
)
def test_doc_command_runs_as_shown(example: Example, scratch):
    why = _why_not_run(example.words)
    if why:
        pytest.skip(why)
    status, text = scratch(example.doc).run(example)
    where = f"{_label(example.doc, example.line)}: `{example.command}`"
    assert "Traceback" not in text, f"{where} fails:\n{text}"
    assert status == _expected_status(example.shown), f"{where} exits {status}:\n{text}"
    if example.words[0] == "ppdsl" and example.words[1] in TIMED:
        return
    missing = (
        _printed_by_processes(example.shown, text) if example.words[0] == "torchrun" else matches(example.shown, text)
    )
    assert missing is None, f"{where} no longer prints\n  {missing}\nit prints:\n{text}"


def _printed_by_processes(shown: list[str], text: str) -> str | None:
    """None when every shown line is somewhere in `text`, which several processes print at once (their lines in any
    order, even run together), a number in exponent notation below NOISE matching any below NOISE; else the first
    line that is not."""
    for line in shown:
        want = " ".join(line.split())
        if not want or want == "...":
            continue
        numbers = [float(x) for x in _FLOAT.findall(want)]
        pattern = re.escape(_FLOAT.sub("\0", want)).replace("\0", f"({_FLOAT.pattern})")
        found = [
            m
            for m in re.finditer(pattern, " ".join(text.split()))
            if all(
                abs(float(g)) < NOISE if abs(x) < NOISE else float(g) == x
                for x, g in zip(numbers, m.groups(), strict=True)
            )
        ]
        if not found:
            return line
    return None


def _whole(tree: ast.SchedFile) -> bool:
    return any(isinstance(item, (ast.Order, ast.Table)) for item in tree.items)


def _read_by_a_command(block: Block) -> bool:
    return block.name is not None and any(block.name in e.words for e in examples(BLOCKS[block.doc]))


@pytest.mark.parametrize("block", SCHED_BLOCKS, ids=[_label(b.doc, b.line) for b in SCHED_BLOCKS])
def test_doc_schedule_parses_and_checks(block: Block, tmp_path):
    tree = parse(block.text, _label(block.doc, block.line))  # a syntax error fails here, with its line
    if not _whole(tree) or _read_by_a_command(block):
        return
    directive = next((line for line in block.lines if line.lstrip().startswith("# ppdsl:")), None)
    sizes = shlex.split(directive.split("ppdsl:", 1)[1]) if directive else ["--pp", "4", "-m", "8"]
    path = tmp_path / (block.name or "example.sched")
    path.write_text(block.text, encoding="utf-8")
    status, text = _run(["ppdsl", "check", str(path), *sizes], tmp_path)
    assert status == 0 and text.startswith("ok:"), f"{_label(block.doc, block.line)} does not check:\n{text}"
