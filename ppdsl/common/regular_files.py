"""The one bounded read of a regular file, under every input ppdsl reads.

Opening a FIFO waits for a writer and a device may do anything, so a file is stat-ed before it is opened, opened
without blocking, and stat-ed again once open (a rename in between may have swapped it); its bytes are read up to a
cap, and a file that grows while it is read stops at the cap too. This module knows nothing of diagnostics, so the
reader of inputs (`files.py`), the quoting of source lines (`diagnostics.py`) and the include policy
(`language/includes.py`) share it without importing each other.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotRegular(Exception):
    """The path names a directory, FIFO, device or socket; `mode` says which (see `kind`)."""

    def __init__(self, mode: int):
        super().__init__(kind(mode))
        self.mode = mode


class TooLarge(Exception):
    """The file holds more than the cap; `size` is its size when known before reading."""

    def __init__(self, size: int | None):
        super().__init__(f"{size} bytes" if size is not None else "more than the cap")
        self.size = size


def kind(mode: int) -> str:
    """What a file of this mode is, as a sentence fragment: "a FIFO", "a character device"..."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | Path) -> tuple[BinaryIO, os.stat_result]:
    """The open regular file `path` and its status; raises NotRegular, or OSError / ValueError (a NUL byte in
    the path) as `os.open` does."""
    before = os.stat(path)
    if not stat.S_ISREG(before.st_mode):
        raise NotRegular(before.st_mode)
    fd = os.open(path, _OPEN_FLAGS)
    f = os.fdopen(fd, "rb")
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        f.close()
        raise NotRegular(info.st_mode)
    return f, info


def read_capped(f: BinaryIO, limit: int) -> bytes:
    """At most `limit` bytes of the open file `f`; raises TooLarge when there are more."""
    data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(None)
    return data


def read_regular(path: str | Path, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file `path`, at most `limit` of them, and its status; raises NotRegular,
    TooLarge, OSError or ValueError."""
    f, info = open_regular(path)
    with f:
        if info.st_size > limit:
            raise TooLarge(info.st_size)
        return read_capped(f, limit), info
