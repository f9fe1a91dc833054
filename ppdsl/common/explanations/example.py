"""What an explanation is: its text, a wrong example and the fixed one, each an `Example` (the commands run in one
directory and the files they read); `sched` and `cmd` build the two kinds of example."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

SCHED = "example.sched"


@dataclass(frozen=True)
class Example:
    """Commands run in one directory holding `files` (name, text); the last command is the one that shows the code.
    `paddle`: it runs training or builds a program, so it needs PaddlePaddle. `setting`: what else it needs that
    a working installation does not have (the tests then check it as a command line, without running it)."""

    commands: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()
    note: str = ""
    paddle: bool = False
    setting: str = ""

    @property
    def runs_anywhere(self) -> bool:
        return not self.paddle and not self.setting

    @property
    def sched(self) -> str | None:
        """The `.sched` text of a schedule example."""
        return dict(self.files).get(SCHED)


@dataclass(frozen=True)
class Explanation:
    text: str
    wrong: Example
    fixed: Example


def sched(text: str, args: str, extra: tuple[tuple[str, str], ...] = ()) -> Example:
    """A schedule example: `text` (dedented) as example.sched, checked at the sizes `args`."""
    return Example((f"ppdsl check {SCHED} {args}",), ((SCHED, textwrap.dedent(text).strip("\n") + "\n"), *extra))


def cmd(
    *commands: str, files: tuple[tuple[str, str], ...] = (), note: str = "", paddle: bool = False, setting: str = ""
) -> Example:
    return Example(tuple(commands), files, note, paddle, setting)
