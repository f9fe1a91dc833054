"""Every file ppdsl reads or writes goes through here, so that no input can hang it or exhaust its memory and no
output can destroy something that is not the output.

Reading (`read_text`, `read_input`): only regular files, refused before a byte is read when they are not (a FIFO,
a device, a directory: `os.stat`, then `O_NONBLOCK` and `fstat` against a swap in between); at most a stated
number of bytes (the `*_BYTES` caps); UTF-8, with a byte order mark accepted. Each file read is recorded, for
the writer.

Writing (`write_output`, `open_output`), through `safe_paths.py`, which walks to the output's directory with
directory descriptors: a directory another user can change is refused (E054), and so is a symlink another user
owns (E058); a regular file or a new path is replaced atomically (an anonymous `O_TMPFILE` in the checked
directory, renamed over the name at the end, keeping the old file's mode, owner and extended attributes; a file
with several hard links is rewritten in place); a symlink's target is what is replaced, never the link. A
character device or a FIFO (`/dev/null`, `/dev/stdout`, a pipe) and `-` (stdout) are written through, never
replaced. A directory, a block device or a socket is refused, as is a file the command has read (its schedule,
an include, a cost file, a CSV, a profile): an output never overwrites an input. Failures are diagnostics (E000,
E050-E054, E058), never tracebacks.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ppdsl.common import safe_paths
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.regular_files import NotRegular, TooLarge, kind, read_regular
from ppdsl.common.text import ascii_number

MiB = 2**20
# How much ppdsl reads of each kind of input: far above any real file of the kind, far below what would hurt.
SCHEDULE_BYTES = 16 * MiB  # a .sched file, and each file it includes
COSTS_BYTES = 1 * MiB  # a cost file (`--costs`, written by `ppdsl calibrate`)
LAYERS_BYTES = 4 * MiB  # a layer profile (`--layers`): tens of bytes a layer
CSV_BYTES = 64 * MiB  # a PyTorch schedule CSV (`ppdsl import`)
PROFILE_BYTES = 64 * MiB  # a Chrome trace (`ppdsl calibrate`, `plot --measured`)
PLAN_BYTES = 256 * MiB  # a plan specification (`plan.json` of a launch, which every rank reads)
SPEC_BYTES = 16 * MiB  # a launch's spec (`spec.json`: the run's options and where the rest is)
MODEL_SOURCE_BYTES = 16 * MiB  # each source file of a `--model` module, as a rank runs it (runtime/launch_spec.py)


def _size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit % MiB == 0 else f"{limit} bytes"


# ---------------------------------------------------------------- the inputs a command has read


_inputs: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) -> the path it was read by


def record_input(path: str | Path) -> None:
    """Note that the command read `path` (the reader does this itself; for a file read some other way)."""
    with contextlib.suppress(OSError, ValueError):
        st = os.stat(path)
        _inputs.setdefault((st.st_dev, st.st_ino), str(path))


def forget_inputs() -> None:
    """Start a new command: nothing read yet (each CLI invocation calls this, so commands run in one process, as
    tests do, do not refuse each other's files)."""
    _inputs.clear()


def _short(path: str) -> str:
    """`path` relative to the working directory when it is inside it (an include is recorded absolute)."""
    if not os.path.isabs(path):
        return path
    with contextlib.suppress(ValueError):
        relative = os.path.relpath(path)
        if not relative.startswith(os.pardir):
            return relative
    return path


def _input_at(st: os.stat_result) -> str | None:
    """The input path that is this file, if the command read it (and the path still names it: a temporary file
    deleted since and its inode number reused is not the same file)."""
    path = _inputs.get((st.st_dev, st.st_ino))
    if path is None:
        return None
    try:
        now = os.stat(path)
    except (OSError, ValueError):
        return None
    return _short(path) if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino) else None


# ---------------------------------------------------------------- reading


class InputError(Exception):
    """An input that cannot be read: `code` is E051 (not a regular file) or E052 (too large), None for an
    ordinary failure (missing, no permission, not UTF-8), which the caller reports under its own code."""

    def __init__(self, path: str | Path, reason: str, code: str | None = None, help: str = ""):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason, self.code, self.help = str(path), reason, code, help

    def diagnostic(self, code: str, message: str, help: str = "") -> Diagnostic:
        """This failure as a diagnostic: `message` says what could not be read (the reason is appended)."""
        return Diagnostic(self.code or code, f"{message}: {self.reason}", help=self.help or help)


def read_input(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; raises InputError."""
    try:
        data, st = read_regular(path, limit)
    except NotRegular as err:
        raise _not_regular(path, err.mode) from None
    except TooLarge as err:
        raise _too_large(path, limit, err.size) from None
    except (OSError, ValueError) as err:  # ValueError: a NUL byte in the path
        raise InputError(path, getattr(err, "strerror", None) or str(err)) from None
    _inputs.setdefault((st.st_dev, st.st_ino), str(path))
    return data


def read_input_text(path: str | Path, limit: int) -> str:
    """The text of the regular file `path` (UTF-8, a byte order mark dropped), at most `limit` bytes; raises
    InputError."""
    return _decoded(read_input(path, limit), path)


def _decoded(data: bytes, path: str | Path) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise InputError(path, f"not UTF-8 text (byte 0x{data[err.start]:02x} on line {line})") from None


def read_stdin_text(limit: int, code: str = "E000", what: str = "") -> str:
    """Standard input as `read_text` reads a file: its bytes (not the locale's decoding of them), at most
    `limit`, as UTF-8 with a byte order mark dropped; a failure is a DiagnosticError under `code` (E052 for too
    many bytes), so that `ppdsl fmt -` takes exactly what `ppdsl fmt FILE` takes."""
    try:
        data = sys.stdin.buffer.read(limit + 1)
        if len(data) > limit:
            raise _too_large("stdin", limit)
        return _decoded(data, "stdin")
    except InputError as err:
        raise DiagnosticError([err.diagnostic(code, f"cannot read {what}stdin")]) from None
    except OSError as err:
        raise DiagnosticError([Diagnostic(code, f"cannot read {what}stdin: {err.strerror or err}")]) from None


def write_stdout(text: str | bytes) -> None:
    """`text` on standard output as UTF-8 bytes, whatever encoding the locale or `PYTHONIOENCODING` gives
    `sys.stdout` (ASCII cannot hold a schedule's text); after what was printed before. A failed write (a closed
    pipe, a full disk) is a DiagnosticError (E053)."""
    with _stdout() as f:
        f.write(text.encode("utf-8") if isinstance(text, str) else text)


def read_text(path: str | Path, limit: int, code: str = "E000", what: str = "", help: str = "") -> str:
    """`read_input_text`, with a failure as a DiagnosticError: "cannot read <what>`path`: why" under `code` for an
    ordinary failure (E051 / E052 for a file that is not regular or too large)."""
    try:
        return read_input_text(path, limit)
    except InputError as err:
        raise DiagnosticError([err.diagnostic(code, f"cannot read {what}`{path}`", help)]) from None


def _not_regular(path: str | Path, mode: int) -> InputError:
    return InputError(
        path, f"{kind(mode)}, not a regular file", "E051", help="ppdsl reads regular files only: copy it into one"
    )


def _too_large(path: str | Path, limit: int, size: int | None = None) -> InputError:
    found = f"{size} bytes" if size is not None else "more than that"
    return InputError(
        path, f"larger than the {_size(limit)} ppdsl reads ({found})", "E052", help="is it the right file?"
    )


# ---------------------------------------------------------------- writing


def _named(path: str | Path, flag: str = "") -> str:
    """An output as messages name it: `path`, or `--flag `path`` when an option gave it."""
    return f"{flag} `{path}`" if flag else f"`{path}`"


def _write_error(path: str | Path, err: OSError, code: str = "E053", flag: str = "") -> DiagnosticError:
    help = {
        errno.ENOSPC: "free some space, or write elsewhere",
        errno.ENOENT: "create the directory first",
        errno.EACCES: "write to a directory you may write to",
    }.get(err.errno or 0, "check the path")
    return DiagnosticError([Diagnostic(code, f"cannot write {_named(path, flag)}: {err.strerror or err}", help=help)])


def _refuse(path: str | Path, reason: str, code: str = "E053", help: str = "", flag: str = "") -> DiagnosticError:
    return DiagnosticError([Diagnostic(code, f"cannot write {_named(path, flag)}: {reason}", help=help)])


@dataclass
class _Target:
    """Where and how an output is written: `through` (opened and written in place: a device, a FIFO, an open
    file of a process) or replaced as the regular file `entry` names (`safe_paths.write_regular`)."""

    entry: safe_paths.Entry
    through: bool
    shown: str = ""  # the path as the user wrote it, for messages


def _target(path: str | Path, make_parents: bool = False, flag: str = "") -> _Target:
    """Decide how `path` is written, refusing (DiagnosticError) what must not be: a directory another user can
    change (E054), another user's symlink (E058), a directory, a block device, a socket, a file the command read.
    `flag` names the option that gave the path, in messages."""
    shown = str(path)
    purpose = f"write {_named(shown, flag)}"
    try:
        entry = safe_paths.locate(shown, purpose, make_parents=make_parents)
    except (FileNotFoundError, NotADirectoryError) as err:
        given = Path(shown).parent  # as the user wrote it
        what = "is not a directory" if isinstance(err, NotADirectoryError) else "does not exist"
        raise _write_error(shown, OSError(err.errno, f"`{given}` {what}"), "E000", flag) from None
    except (OSError, ValueError) as err:  # ELOOP, EACCES on a directory above, a NUL byte
        raise _write_error(
            shown, err if isinstance(err, OSError) else OSError(errno.EINVAL, str(err)), "E000", flag
        ) from None
    try:
        return _checked(entry, shown, flag)
    except BaseException:
        entry.close()
        raise


def _checked(entry: safe_paths.Entry, shown: str, flag: str) -> _Target:
    st = entry.st
    if entry.fd is not None:
        with contextlib.suppress(OSError):
            st = os.fstat(entry.fd) if entry.fd >= 0 else os.stat(entry.name)
    if st is not None:
        read_as = _input_at(st)
        if read_as is not None:
            other = os.path.abspath(read_as) != os.path.abspath(shown)
            same = " (the same file by another name)" if other else ""
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E050",
                        f"the output `{shown}` is the input `{read_as}`{same}: writing it would destroy what was read",
                        help="write the output to another file",
                    )
                ]
            )
    if entry.fd is not None:
        return _Target(entry, through=True, shown=shown)
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise _refuse(shown, "it is a directory", help="name a file (in that directory, say)", flag=flag)
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            return _Target(entry, through=True, shown=shown)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(
                shown,
                f"it is {kind(st.st_mode)}",
                help="write a regular file, a FIFO or a character device",
                flag=flag,
            )
    directory = entry.directory
    assert directory is not None
    safe_paths.check_replaceable(entry, f"write {_named(shown, flag)}")
    if not os.access(".", os.W_OK | os.X_OK, dir_fd=directory.fd):  # the new file is made in it, then renamed
        unwritable = OSError(errno.EACCES, f"the directory `{directory.path}` is not writable")
        raise _write_error(shown, unwritable, "E000", flag)
    return _Target(entry, through=False, shown=shown)


def check_output(path: str | Path, flag: str = "") -> None:
    """Refuse, before any work, an output that `write_output` would refuse now or could not make (a directory, an
    input of the command, a missing or unwritable directory, one another user can change): DiagnosticError naming
    `flag` (the option that gave the path) if there is one. The directory is tried by making and removing a
    temporary file in it, for its permission bits do not tell it all (a read-only mount, an ACL, a full disk's
    inodes). `-` (stdout) is fine."""
    if str(path) == "-":
        return
    target = _target(path, flag=flag)
    try:
        if not target.through:  # a device or FIFO is written through, not replaced
            assert target.entry.directory is not None
            safe_paths.probe(target.entry.directory, target.entry.name)
    except OSError as err:
        raise _write_error(path, err, "E000", flag) from None
    finally:
        target.entry.close()


def clean_stale_temporaries(target: str | Path) -> list[Path]:
    """Remove the temporary files an earlier write of `target` left when its process was killed
    (`safe_paths.clean_stale_temporaries`)."""
    target = Path(target)
    try:
        with safe_paths.open_directory(target.parent, f"clean beside `{target}`") as directory:
            return [target.parent / n for n in safe_paths.clean_stale_temporaries(directory, target.name)]
    except (OSError, DiagnosticError):
        return []


@contextlib.contextmanager
def _atomic(target: _Target) -> Iterator[BinaryIO]:
    try:
        with safe_paths.write_regular(target.entry, f"write `{target.shown}`") as f:
            yield f
    except OSError as err:
        raise _write_error(target.shown, err) from None


@contextlib.contextmanager
def _through(target: _Target) -> Iterator[BinaryIO]:
    path, entry = target.shown, target.entry
    try:
        if entry.fd is not None and entry.fd >= 0:
            sys.stdout.flush()  # what the command printed before comes first
            sys.stderr.flush()
            fd = os.dup(entry.fd)
        elif entry.fd is not None:  # another process's open file: the kernel's own link, written through
            fd = os.open(entry.name, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_CLOEXEC)
        else:
            # a FIFO waits here for its reader, as a shell's `>` does; O_APPEND: another process's redirected
            # output keeps what it holds (and a device ignores it)
            assert entry.directory is not None and entry.st is not None
            fd = safe_paths.open_existing(entry.directory, entry.name, entry.st, os.O_WRONLY | os.O_APPEND, block=True)
    except OSError as err:
        raise _write_error(path, err, "E000") from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
    except OSError as err:  # /dev/full: ENOSPC; a FIFO whose reader left: EPIPE
        raise _write_error(path, err) from None


@contextlib.contextmanager
def _stdout() -> Iterator[BinaryIO]:
    sys.stdout.flush()
    buf = io.BytesIO()
    yield buf
    try:
        sys.stdout.buffer.write(buf.getvalue())
        sys.stdout.flush()
    except OSError as err:
        raise _write_error("stdout", err) from None


@contextlib.contextmanager
def open_output(
    path: str | Path,
    make_parents: bool = False,
    _replacing: tuple[int, int] | None = None,
    _within: str | None = None,
) -> Iterator[BinaryIO]:
    """A binary file to write the output `path` into: replaced when the block ends without an exception (nothing
    changes otherwise; see `safe_paths.write_regular`), or written through for a device, a FIFO or `-` (stdout).
    Raises DiagnosticError for what it refuses and for a failed write."""
    if str(path) == "-":
        with _stdout() as f:
            yield f
        return
    target = _target(path, make_parents)
    try:
        if _replacing is not None:
            _still(target, _replacing, _within)
        with _through(target) if target.through else _atomic(target) as f:
            yield f
    finally:
        target.entry.close()


def write_output(path: str | Path, data: str | bytes, make_parents: bool = False) -> None:
    """Write `data` (text as UTF-8) to the output `path` (see `open_output`)."""
    with open_output(path, make_parents) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def _still(target: _Target, read: tuple[int, int], within: str | None) -> None:
    """The file about to be replaced is the one read, and (for a file found under a tree) in that tree."""
    st = target.entry.st
    if target.through or st is None or not stat.S_ISREG(st.st_mode):
        what = kind(st.st_mode) if st is not None and not target.through else "not a regular file"
        raise _refuse(target.shown, f"it is {what} now", help="rewrite only a regular file")
    if (st.st_dev, st.st_ino) != read:
        raise _refuse(target.shown, "it is not the file that was read", help="run the command again")
    directory = target.entry.directory
    if within is not None and directory is not None and os.path.commonpath([directory.path, within]) != within:
        raise _refuse(
            target.shown, f"it is in `{directory.path}` now, outside `{within}`", help="run the command again"
        )


def rewrite_input(path: str | Path, data: str, within: str | None = None) -> None:
    """Replace the regular file `path`, which the command read, with `data` (as `write_output` does): the one
    output allowed over an input, for a command whose output is its input rewritten (`ppdsl fmt`). Refuses (E053)
    a path that no longer names the regular file read: a FIFO, a device or another file moved to that name since
    is never written, and so is one whose directory is no longer under `within` (a real path) if given."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as err:
        raise _write_error(path, err if isinstance(err, OSError) else OSError(errno.EINVAL, str(err)), "E000") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, f"it is {kind(st.st_mode)} now", help="rewrite only a regular file")
    key = (st.st_dev, st.st_ino)
    if key not in _inputs:  # another file was moved to this name since it was read
        raise _refuse(path, "it is not the file that was read", help="run the command again")
    read_as = _inputs.pop(key)  # this input may be replaced; any other the command read may not
    try:
        with open_output(
            path, _replacing=key, _within=within
        ) as f:  # the file replaced is the one read, as found by the writer
            f.write(data.encode("utf-8"))
    except BaseException:
        _inputs[key] = read_as
        raise


# the names of the first version, which only replaced files
open_atomic = open_output
write_atomic = write_output


# ---------------------------------------------------------------- directories ppdsl owns


def trusted_directory(path: str | Path, what: str, create: bool = True) -> safe_paths.Directory:
    """The directory `path` (made if missing and `create`), open, if neither it nor a directory above it can be
    changed by another user (as ssh checks `~/.ssh`): for directories whose files are reopened by name later (a
    run directory, a save directory). `what` names it in messages (`--run-dir`). Raises DiagnosticError: E054 for
    a directory another user can change, E058 for another user's symlink on the way, E000 otherwise."""
    try:
        return safe_paths.open_directory(path, f"use {what} `{path}`", ancestors=True, create=create)
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        if isinstance(err, NotADirectoryError):
            reason = f"`{getattr(err, 'filename', None) or path}` is not a directory"
        raise DiagnosticError(
            [Diagnostic("E000", f"cannot use {what} `{path}`: {reason}", help="name a directory you may write to")]
        ) from None


def new_owned_directory(parent: str | Path, prefix: str, what: str = "--run-dir") -> Path:
    """A new directory `parent/<prefix><n>` (the next free n), made here with mode 0700 and so ppdsl's alone: what
    goes in it may be written and replaced freely, and nothing else in `parent` is touched. `parent` and every
    directory above it must be safe from other users (`trusted_directory`)."""
    parent = Path(parent)
    with trusted_directory(parent, what) as directory:
        try:
            for _ in range(1000):  # another launch may take the same number at once: mkdir decides
                name = f"{prefix}{next_owned_number(parent, prefix)}"
                try:
                    safe_paths.make_directory(directory, name, 0o700)
                    return parent / name
                except FileExistsError:
                    continue
        except OSError as err:
            raise _write_error(parent, err, "E000") from None
    raise _refuse(parent, f"no free name `{prefix}<n>`", "E000")


def next_owned_number(parent: str | Path, prefix: str) -> int:
    """The n `new_owned_directory` would use now: one more than any `<prefix><n>` in `parent`, n an ASCII numeral of
    at most 9 digits; another name (`launch-²`, which `int()` refuses, `launch-٣`, or 300 digits) is not ppdsl's
    and is ignored."""
    numbers = [0]
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            n = ascii_number(name[len(prefix) :]) if name.startswith(prefix) else None
            if n is not None:
                numbers.append(n)
    return max(numbers) + 1
