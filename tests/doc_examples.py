"""The examples of the README and docs/*.md, read as the tests run them (tests/test_readme.py, tests/test_docs.py).

A fenced block's info string is its language, then optionally the name of the file it is: ```` ```sched half.sched ````
or ```` ```json costs.json ````. In a `text` (`console`, `sh`) block a line `$ COMMAND` is a command (a line ending in `\\` goes on on
the next one; a trailing `  # comment` is not part of it), and the lines after it up to the next command or the
block's end are the output it shows. In shown output a line ending in `...` stands for any line that starts with
what comes before it, and a line `...` alone for lines left out.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

FENCE = "```"
# the languages of blocks whose `$ ` lines are commands
COMMAND_LANGS = ("text", "console", "sh", "shell", "bash")


@dataclass(frozen=True)
class Block:
    """A fenced code block: where it starts (the fence's line), its language and file name, its lines."""

    doc: Path
    line: int
    lang: str
    name: str | None
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass
class Example:
    """A `$ ` command of a text block and the output shown after it."""

    doc: Path
    line: int
    command: str
    shown: list[str] = field(default_factory=list)

    @property
    def words(self) -> list[str]:
        return shlex.split(self.command)


def blocks(doc: Path) -> list[Block]:
    """Every fenced block of a Markdown file, in order."""
    out, start, info, body = [], 0, "", None
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if body is None:
            if line.startswith(FENCE):
                start, info, body = number, line[len(FENCE) :].split(), []
        elif line.startswith(FENCE):
            lang = info[0] if info else ""
            out.append(Block(doc, start, lang, info[1] if len(info) > 1 else None, tuple(body)))
            body = None
        else:
            body.append(line)
    return out


def examples(blocks_: list[Block]) -> list[Example]:
    """The `$ ` commands of the command blocks (COMMAND_LANGS), with the output each shows."""
    out: list[Example] = []
    for block in blocks_:
        if block.lang not in COMMAND_LANGS:
            continue
        current, continued = None, False
        for offset, line in enumerate(block.lines, 1):
            if continued and current is not None:
                current.command = f"{current.command} {line.strip()}"
            elif line.startswith("$ "):
                current = Example(block.doc, block.line + offset, line[2:])
                out.append(current)
            elif current is not None:
                current.shown.append(line)
                continue
            else:
                continue
            continued = current.command.endswith("\\")
            current.command = _command_text(current.command.removesuffix("\\"))
    return out


def _command_text(text: str) -> str:
    """A command without its trailing comment (`  # ...`, outside quotes) and extra spaces."""
    return re.sub(r"\s+#.*$", "", text).strip()


def matches(shown: list[str], actual: str) -> str | None:
    """None when every shown line appears in `actual`, in order (spaces compared as one); else the first that
    does not."""
    got = [" ".join(line.split()) for line in actual.splitlines()]
    at = 0
    for line in shown:
        want = " ".join(line.split())
        if not want or want == "...":
            continue
        prefix = want.endswith("...")
        want = want.removesuffix("...").rstrip()
        while at < len(got) and not (got[at].startswith(want) if prefix else got[at] == want):
            at += 1
        if at == len(got):
            return line
        at += 1
    return None
