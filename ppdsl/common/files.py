"""Every file ppdsl reads or writes goes through here, so that no input can hang it or exhaust its memory and no
output can destroy something that is not the output.

Reading (`read_text`, `read_input`): only regular files, refused before a byte is read when they are not (a FIFO,
a device, a directory: `os.stat`, then `O_NONBLOCK` and `fstat` against a swap in between); at most a stated
number of bytes (the `*_BYTES` caps); UTF-8, with a byte order mark accepted. Each file read is recorded, for
the writer.

Writing (`write_output`, `open_output`): a regular file or a new path is replaced atomically (an anonymous
`O_TMPFILE` beside it, linked and renamed over it at the end: the file is the old one or the whole new one, and
a `kill -9` leaves no temporary file); a symlink's target is what is replaced, never the link. A character
device or a FIFO (`/dev/null`, `/dev/stdout`, a pipe) and `-` (stdout) are written through, never replaced. A
directory, a block device or a socket is refused, as is a file the command has read (its schedule, an include,
a cost file, a CSV, a profile): an output never overwrites an input. Failures are diagnostics (E000, E050-E053),
never tracebacks.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import secrets
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.regular_files import NotRegular, TooLarge, kind, read_regular
from ppdsl.common.text import ascii_number

MiB = 2**20
# How much ppdsl reads of each kind of input: far above any real file of the kind, far below what would hurt.
SCHEDULE_BYTES = 16 * MiB  # a .sched file, and each file it includes
COSTS_BYTES = 1 * MiB  # a cost file (`--costs`, written by `ppdsl calibrate`)
CSV_BYTES = 64 * MiB  # a PyTorch schedule CSV (`ppdsl import`)
PROFILE_BYTES = 64 * MiB  # a Chrome trace (`ppdsl calibrate`, `plot --measured`)
PLAN_BYTES = 256 * MiB  # a plan specification (`plan.json` of a launch, which every rank reads)
SPEC_BYTES = 16 * MiB  # a launch's spec (`spec.json`: the run's options and where the rest is)
MODEL_SOURCE_BYTES = 16 * MiB  # each source file of a `--model` module, as a rank runs it (runtime/launch_spec.py)

# A temporary file that had to be named (no O_TMPFILE on this file system, or the short moment between linking
# it and renaming it over the target): `.<name>.ppdsl-<host>-<pid>-<random>.tmp`, so a later write of the same
# name recognises one whose process is gone and removes it.
_TEMP = re.compile(r"^\.(?P<name>.+)\.ppdsl-(?P<host>[A-Za-z0-9-]*)-(?P<pid>\d+)-[0-9a-f]+\.tmp$")
_STALE_SECONDS = 60.0  # a temporary file younger than this may still be on its way to its name
_FD_LINK = re.compile(r"^/(?:proc/(?P<pid>self|thread-self|\d+)/fd|dev/fd)/(?P<fd>\d+)$|^/dev/std(?P<std>in|out|err)$")
_STD_FDS = {"in": 0, "out": 1, "err": 2}


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
    data = read_input(path, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise InputError(path, f"not UTF-8 text (byte 0x{data[err.start]:02x} on line {line})") from None


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


def _fd_link(path: str) -> int | None:
    """For `/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N` (or a symlink to one), an open file of a process, which
    the shell redirected (`> log`): N if it is this process's (written through that descriptor, whose offset the
    command's other output shares), -1 for another process's, None for any other path. Replacing what such a
    path points to would cut the redirection."""
    p = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on a chain of symlinks
        m = _FD_LINK.match(p)
        if m and m["std"]:
            return _STD_FDS[m["std"]]
        if m:
            return int(m["fd"]) if m["pid"] in (None, "self", "thread-self", str(os.getpid())) else -1
        try:
            p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
        except OSError:
            return None
    return None


def _foreign_link_in_shared_directory(path: str) -> bool:
    """A symlink another user made in a sticky world-writable directory (/tmp): the kernel would not follow it for
    us (fs.protected_symlinks), and resolving it here must not either, or anyone could aim a root's `-o /tmp/x`
    at any file."""
    try:
        link = os.lstat(path)
        if not stat.S_ISLNK(link.st_mode):
            return False
        parent = os.stat(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    shared = parent.st_mode & stat.S_ISVTX and parent.st_mode & stat.S_IWOTH
    return bool(shared) and link.st_uid not in (parent.st_uid, os.geteuid())


@dataclass(frozen=True)
class _Target:
    """Where and how an output is written: `through` (opened and written in place) or replaced atomically at
    `path` (a symlink resolved), keeping `mode` if it replaces a file."""

    path: Path
    through: bool
    mode: int | None = None
    shown: str = ""  # the path as the user wrote it, for messages
    fd: int | None = None  # written through this open descriptor of the process (`/dev/stdout`)


def _target(path: str | Path, make_parents: bool = False, flag: str = "") -> _Target:
    """Decide how `path` is written, refusing (DiagnosticError) what must not be: a directory, a block device, a
    socket, a file the command read. `flag` names the option that gave the path, in messages."""
    shown = str(path)
    if _foreign_link_in_shared_directory(shown):
        raise _refuse(
            shown,
            "it is another user's symlink in a shared directory",
            help="remove the link or write elsewhere: following it could overwrite any file",
            flag=flag,
        )
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):  # a new file; whether its directory is one is said below
        st = None
    except (OSError, ValueError) as err:  # ELOOP, EACCES on a directory above, a NUL byte
        raise _write_error(
            shown, err if isinstance(err, OSError) else OSError(errno.EINVAL, str(err)), "E000", flag
        ) from None
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
        if stat.S_ISDIR(st.st_mode):
            raise _refuse(shown, "it is a directory", help="name a file (in that directory, say)", flag=flag)
        fd = _fd_link(shown)
        if fd is not None:
            return _Target(Path(shown), through=True, shown=shown, fd=None if fd < 0 else fd)
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            return _Target(Path(shown), through=True, shown=shown)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(
                shown,
                f"it is {kind(st.st_mode)}",
                help="write a regular file, a FIFO or a character device",
                flag=flag,
            )
    real = Path(os.path.realpath(path))  # a symlink: its target is replaced, where it lives
    if st is None:
        if make_parents:
            try:
                real.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise _write_error(real.parent, err, "E000") from None
        if not real.parent.is_dir():
            what = "is not a directory" if os.path.lexists(real.parent) else "does not exist"
            given = Path(shown).parent  # as the user wrote it
            raise _write_error(shown, OSError(errno.ENOENT, f"`{given}` {what}"), "E000", flag)
        if not os.access(real.parent, os.W_OK | os.X_OK):
            unwritable = OSError(errno.EACCES, f"the directory `{real.parent}` is not writable")
            raise _write_error(shown, unwritable, "E000", flag)
        return _Target(real, through=False, shown=shown)
    if not os.access(real.parent, os.W_OK | os.X_OK):  # the new file is made beside the old one, then renamed
        unwritable = OSError(errno.EACCES, f"the directory `{real.parent}` is not writable")
        raise _write_error(shown, unwritable, "E000", flag)
    return _Target(real, through=False, mode=st.st_mode & 0o777, shown=shown)


def check_output(path: str | Path, flag: str = "") -> None:
    """Refuse, before any work, an output that `write_output` would refuse now or could not make (a directory, an
    input of the command, a missing or unwritable directory): DiagnosticError naming `flag` (the option that gave
    the path) if there is one. The directory is tried by making and removing a temporary file in it, for its
    permission bits do not tell it all (a read-only mount, an ACL, a full disk's inodes). `-` (stdout) is fine."""
    if str(path) == "-":
        return
    target = _target(path, flag=flag)
    if target.through:  # a device or FIFO is written through, not replaced
        return
    try:
        fd, probe = tempfile.mkstemp(dir=target.path.parent, prefix=f".{target.path.name[:150]}.", suffix=".tmp")
    except OSError as err:
        raise _write_error(path, err, "E000", flag) from None
    os.close(fd)
    os.unlink(probe)


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "", socket.gethostname())[:24]


def _temp_name(target: Path) -> Path:
    stem = target.name[:150]  # within NAME_MAX (255) with the rest of the name
    return target.with_name(f".{stem}.ppdsl-{_host()}-{os.getpid()}-{secrets.token_hex(4)}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, and is another user's
        return True
    return True


def clean_stale_temporaries(target: str | Path) -> list[Path]:
    """Remove the temporary files an earlier write of `target` left when its process was killed: ppdsl's names
    for this target, from this host, of a process that is gone, owned by this user, older than a minute."""
    target = Path(target)
    removed = []
    host, now = _host(), time.time()
    try:
        names = os.listdir(target.parent)
    except OSError:
        return removed
    for name in names:
        m = _TEMP.match(name)
        if not m or m["name"] != target.name[:150] or m["host"] != host or _alive(int(m["pid"])):
            continue
        path = target.parent / name
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and now - st.st_mtime > _STALE_SECONDS:
                os.unlink(path)
                removed.append(path)
    return removed


def _anonymous(directory: Path) -> int | None:
    """A file in `directory` with no name (O_TMPFILE): nothing is left of it if the process dies. None where the
    kernel or file system has no such thing."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        return os.open(directory, flag | os.O_RDWR | os.O_CLOEXEC, 0o666)
    except OSError as err:
        if err.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            return None
        raise


def _publish(fd: int, named: Path | None, target: Path) -> None:
    """Give the written file its name: link the anonymous file to a temporary name beside the target, then
    rename that over the target (a rename replaces, a link cannot). The temporary name never outlives a failure."""
    anonymous = named is None
    named = _temp_name(target) if named is None else named
    try:
        if anonymous:
            try:
                os.link(f"/proc/self/fd/{fd}", named)  # linkat(AT_SYMLINK_FOLLOW): no privilege, unlike AT_EMPTY_PATH
            except OSError:  # no /proc: copy what was written into a named file
                _copy(fd, named)
        os.replace(named, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(named)
        raise


def _copy(fd: int, named: Path) -> None:
    os.lseek(fd, 0, os.SEEK_SET)
    with open(named, "xb") as out, os.fdopen(os.dup(fd), "rb") as src:
        while chunk := src.read(MiB):
            out.write(chunk)
        os.fchmod(out.fileno(), os.fstat(fd).st_mode & 0o777)
        out.flush()
        os.fsync(out.fileno())


@contextlib.contextmanager
def _atomic(target: _Target) -> Iterator[BinaryIO]:
    clean_stale_temporaries(target.path)
    named = None
    try:
        fd = _anonymous(target.path.parent)
        if fd is None:
            named = _temp_name(target.path)
            fd = os.open(named, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as err:
        raise _write_error(target.shown, err, "E000") from None
    try:
        if target.mode is not None:
            os.fchmod(fd, target.mode)  # replacing a file keeps its permissions
        with os.fdopen(fd, "wb", closefd=False) as f:
            yield f
            f.flush()
            os.fsync(fd)
        _publish(fd, named, target.path)
        named = None
    except OSError as err:
        raise _write_error(target.shown, err) from None
    finally:
        os.close(fd)
        if named is not None:
            with contextlib.suppress(OSError):
                os.unlink(named)


@contextlib.contextmanager
def _through(target: _Target) -> Iterator[BinaryIO]:
    path = target.shown
    try:
        if target.fd is not None:
            sys.stdout.flush()  # what the command printed before comes first
            sys.stderr.flush()
            fd = os.dup(target.fd)
        else:
            # a FIFO waits here for its reader, as a shell's `>` does; O_APPEND: another process's redirected
            # output keeps what it holds (and a device ignores it)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_CLOEXEC)
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
def open_output(path: str | Path, make_parents: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write the output `path` into: replaced atomically when the block ends without an exception
    (nothing changes otherwise), or written through for a device, a FIFO or `-` (stdout). Raises DiagnosticError
    for what it refuses and for a failed write."""
    if str(path) == "-":
        with _stdout() as f:
            yield f
        return
    target = _target(path, make_parents)
    with _through(target) if target.through else _atomic(target) as f:
        yield f


def write_output(path: str | Path, data: str | bytes, make_parents: bool = False) -> None:
    """Write `data` (text as UTF-8) to the output `path` (see `open_output`)."""
    with open_output(path, make_parents) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def rewrite_input(path: str | Path, data: str) -> None:
    """Replace the regular file `path`, which the command read, with `data` (atomically, through `write_output`):
    the one output allowed over an input, for a command whose output is its input rewritten (`ppdsl fmt`).
    Refuses (E053) a path that no longer names the regular file read: a FIFO, a device or another file moved to
    that name since is never written."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as err:
        raise _write_error(path, err if isinstance(err, OSError) else OSError(errno.EINVAL, str(err)), "E000") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, f"it is {kind(st.st_mode)} now", help="rewrite only a regular file")
    if (st.st_dev, st.st_ino) not in _inputs:  # another file was moved to this name since it was read
        raise _refuse(path, "it is not the file that was read", help="run the command again")
    del _inputs[(st.st_dev, st.st_ino)]  # this input may be replaced; any other the command read may not
    write_output(path, data)


# the names of the first version, which only replaced files
open_atomic = open_output
write_atomic = write_output


# ---------------------------------------------------------------- directories ppdsl owns


def new_owned_directory(parent: str | Path, prefix: str) -> Path:
    """A new directory `parent/<prefix><n>` (the next free n), made here and so ppdsl's alone: what goes in it
    may be written and replaced freely, and nothing else in `parent` is touched."""
    parent = Path(parent)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for _ in range(1000):  # another launch may take the same number at once: mkdir decides
            candidate = parent / f"{prefix}{next_owned_number(parent, prefix)}"
            try:
                candidate.mkdir()
                return candidate
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
