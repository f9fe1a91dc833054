"""Writing files so that a failure never leaves a half-written one: write beside the target, then rename.

Every file ppdsl writes (reports, plan modules, pictures, checkpoints, a launch's spec and results) goes
through here: the user's file is either the old one or the whole new one, and no temporary file is left behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def open_atomic(path: str | Path, make_parents: bool = False) -> Iterator[BinaryIO]:
    """A binary file that replaces `path` when the block ends without an exception, and vanishes otherwise."""
    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make every output private to its writer
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_atomic(path: str | Path, data: str | bytes, make_parents: bool = False) -> None:
    """Write `data` (text as UTF-8) to `path` atomically."""
    with open_atomic(path, make_parents) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
