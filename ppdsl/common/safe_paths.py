"""Where ppdsl writes when other users share the machine: one walk to a directory, checked as ssh checks `~/.ssh`,
and one writer relative to the directory it checked.

The threat: another local user (ppdsl often runs as root on shared machines) owns or can write a directory ppdsl
writes into, or plants a symlink or a hard link there, so that a write meant for `plan_1f1b.py` or
`checkpoint.npz` lands on a file of their choosing. The kernel's `fs.protected_symlinks` refuses some of that, but
only in sticky directories, and only where it is switched on; nothing here relies on it.

- A directory is *trusted* when it is owned by the effective user or root and nobody else can write it: not
  writable by others, nor by its group unless that is the owner's private group (as Debian's ssh allows). A
  sticky directory that others can write (`/tmp`) is *shared*: there ppdsl only creates new names (`linkat`, which
  fails on an existing name) and replaces only its own files.
- A path is walked one component at a time from `/` with directory descriptors (`openat` with `O_NOFOLLOW`), so
  the directory checked is the one written into, whatever is renamed meanwhile. A symlink is followed only if its
  owner is the effective user or root (and it is read again to prove it was not swapped while it was read).
- `ancestors=True`, for the directories whose files other processes reopen by name later (a run directory, a save
  directory), checks every directory from `/` down; otherwise only the directory the entry is in.
- A regular file is written to an anonymous file (`O_TMPFILE`) in that directory and renamed over its name
  (`renameat`), keeping the old file's permission bits (setuid / setgid only where the owner / group is kept),
  owner and group (where permitted) and extended attributes; a file with several hard links is rewritten in place
  instead (which is not atomic), so that the links stay one file.

Refusals are DiagnosticErrors: E054 (a directory another user can change), E058 (another user's symlink, or
another user's file in a shared directory); anything else is an OSError for the caller to report.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import io
import os
import pwd
import re
import secrets
import socket
import stat
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# the directories on the way are opened only to be walked through: O_PATH needs no read permission (a home
# directory of mode 0711), as the kernel's own lookup does not
_WALK_FLAGS = _DIR_FLAGS | getattr(os, "O_PATH", 0)
_MAX_LINKS = 40  # the kernel's own limit on the symlinks one lookup follows
_FD_LINK = re.compile(r"^/(?:proc/(?P<pid>self|thread-self|\d+)/fd|dev/fd)/(?P<fd>\d+)$|^/dev/std(?P<std>in|out|err)$")
_STD_FDS = {"in": 0, "out": 1, "err": 2}

# A temporary file that had to be named (no O_TMPFILE on this file system, or the short moment between linking
# it and renaming it over the target): `.<name>.ppdsl-<host>-<pid>-<random>.tmp`, so a later write of the same
# name recognises one whose process is gone and removes it.
_TEMP = re.compile(r"^\.(?P<name>.+)\.ppdsl-(?P<host>[A-Za-z0-9-]*)-(?P<pid>\d+)-[0-9a-f]+\.tmp$")
_STALE_SECONDS = 60.0  # a temporary file younger than this may still be on its way to its name
MiB = 2**20


# ---------------------------------------------------------------- who may change a directory


def _trusted_owner(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def owner_name(uid: int) -> str:
    """`alice (uid 1000)`, or `uid 12345` for a uid with no account."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _private_group(st: os.stat_result) -> bool:
    """The directory's group is its owner's own (a user private group: the owner's primary group, no other
    member listed), so group write is the owner's alone."""
    try:
        owner, group = pwd.getpwuid(st.st_uid), grp.getgrgid(st.st_gid)
    except KeyError:
        return False
    return owner.pw_gid == st.st_gid and set(group.gr_mem) <= {owner.pw_name}


def directory_problem(st: os.stat_result) -> str | None:
    """Why a user other than the effective one (or root) could change what the directory of status `st` holds, as
    a sentence's end ("is owned by ..."), or None. A sticky directory others can write is not a problem here: it
    is shared (`is_shared`), and written create-only."""
    if not _trusted_owner(st.st_uid):
        return f"is owned by {owner_name(st.st_uid)}"
    if st.st_mode & stat.S_ISVTX:
        return None
    if st.st_mode & stat.S_IWOTH:
        return "can be written by every user"
    if st.st_mode & stat.S_IWGRP and not _private_group(st):
        try:
            group = f"group `{grp.getgrgid(st.st_gid).gr_name}`"
        except KeyError:
            group = f"group {st.st_gid}"
        return f"can be written by {group}"
    return None


def is_shared(st: os.stat_result) -> bool:
    """A sticky directory others can write (`/tmp`): others may add names, not remove or rename ours."""
    return bool(st.st_mode & stat.S_ISVTX and st.st_mode & (stat.S_IWOTH | stat.S_IWGRP))


def _untrusted_directory(purpose: str, path: str, problem: str, parent: bool) -> DiagnosticError:
    where = f"its directory `{path}`" if not parent else f"`{path}`, a directory above it,"
    return DiagnosticError(
        [
            Diagnostic(
                "E054",
                f"cannot {purpose}: {where} {problem}, who could swap what ppdsl writes there",
                help=f"use a directory only you (or root) can change, or make this one so: "
                f"`chown {_me()} {path}` and `chmod go-w {path}`",
            )
        ]
    )


def _me() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _foreign_link(purpose: str, link: str, uid: int) -> DiagnosticError:
    return DiagnosticError(
        [
            Diagnostic(
                "E058",
                f"cannot {purpose}: `{link}` is a symlink of {owner_name(uid)}, which ppdsl does not follow",
                help="following another user's symlink could overwrite any file: remove the link, or name the "
                "file it points to",
            )
        ]
    )


def _foreign_file(purpose: str, path: str, uid: int) -> DiagnosticError:
    return DiagnosticError(
        [
            Diagnostic(
                "E058",
                f"cannot {purpose}: `{path}` is a file of {owner_name(uid)} in a directory others share, where "
                "ppdsl only creates new files and replaces its own",
                help="write to another name, or into a directory of your own",
            )
        ]
    )


# ---------------------------------------------------------------- walking to a directory


@dataclass
class Directory:
    """An open directory, reached by `open_directory`: `fd` (what is written into), `path` (its real path, for
    messages and for the files a symlink names relative to it), `shared` (create-only, see `is_shared`)."""

    fd: int
    path: str
    st: os.stat_result

    @property
    def shared(self) -> bool:
        return is_shared(self.st)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def __enter__(self) -> Directory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_link(dir_fd: int, name: str, st: os.stat_result, purpose: str, shown: str) -> str:
    """The target of the symlink `name`, if the effective user or root owns it (E058 otherwise); read, then
    looked at again, so a link swapped for another user's while it was read is refused too."""
    if not _trusted_owner(st.st_uid):
        raise _foreign_link(purpose, shown, st.st_uid)
    target = os.readlink(name, dir_fd=dir_fd)
    again = os.lstat(name, dir_fd=dir_fd)
    if (again.st_dev, again.st_ino, again.st_uid) != (st.st_dev, st.st_ino, st.st_uid):
        raise _foreign_link(purpose, shown, again.st_uid)
    return target


def _join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


def open_directory(
    path: str | Path, purpose: str, *, ancestors: bool = False, create: bool = False, mode: int = 0o777
) -> Directory:
    """The directory `path`, open, walked from `/` component by component (see the module's doc). `create`
    makes missing directories (with `mode`, less the umask, never writable by group or others). Raises
    DiagnosticError (E054, E058) in the words of `purpose` ("write `out.json`"), or OSError (ENOENT, ENOTDIR,
    ELOOP, EACCES...)."""
    absolute = os.path.join(os.getcwd(), os.fspath(path))
    names = deque(p for p in absolute.split("/") if p)
    stack = [(os.open("/", _WALK_FLAGS), "/")]
    follows = 0
    try:
        while names:
            name = names.popleft()
            if name == ".":
                continue
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop()[0])
                continue
            fd, real = stack[-1]
            try:
                st = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: checked below as any other
                    os.mkdir(name, mode & ~0o022, dir_fd=fd)  # never writable by others, whatever the umask
                st = os.lstat(name, dir_fd=fd)
            if stat.S_ISLNK(st.st_mode):
                follows += 1
                if follows > _MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
                target = _read_link(fd, name, st, purpose, _join(real, name))
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop()[0])
                names.extendleft(reversed([p for p in target.split("/") if p]))
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), _join(real, name))
            child = os.open(name, _WALK_FLAGS, dir_fd=fd)
            stack.append((child, _join(real, name)))
        statuses = [os.fstat(fd) for fd, _ in stack]
        checked = range(len(stack)) if ancestors else [len(stack) - 1]
        for i in checked:
            problem = directory_problem(statuses[i])
            if problem is not None:
                raise _untrusted_directory(purpose, stack[i][1], problem, parent=i != len(stack) - 1)
        fd, real = stack.pop()
        with contextlib.suppress(OSError):  # readable too where it may be (to list it, for stale temporaries)
            readable = os.open(".", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = readable
        return Directory(fd, real, statuses[-1])
    finally:
        for fd, _ in stack:
            os.close(fd)


# ---------------------------------------------------------------- finding the entry an output names


@dataclass
class Entry:
    """What an output path names once its symlinks are followed (the trusted ones only): `name` in `directory`,
    with its status `st` (None for a new file); or `fd`, an open file of a process (`/dev/stdout`,
    `/proc/self/fd/1`: N for this process, -1 for another's), whose redirection a rename would cut."""

    directory: Directory | None
    name: str
    st: os.stat_result | None
    fd: int | None = None

    def close(self) -> None:
        if self.directory is not None:
            self.directory.close()


def _fd_link(path: str) -> int | None:
    m = _FD_LINK.match(os.path.normpath(path))
    if m is None:
        return None
    if m["std"]:
        return _STD_FDS[m["std"]]
    return int(m["fd"]) if m["pid"] in (None, "self", "thread-self", str(os.getpid())) else -1


def locate(path: str | Path, purpose: str, *, make_parents: bool = False) -> Entry:
    """The entry the output `path` names (see `Entry`), its trusted symlinks followed and its directory checked
    (`open_directory`; E054, E058). A path ending in `/` or `.` names a directory: its `st` says so."""
    path = os.path.join(os.getcwd(), os.fspath(path))
    for _ in range(_MAX_LINKS):
        fd = _fd_link(path)
        if fd is not None:
            return Entry(None, path, None, fd=fd)
        head, name = os.path.split(path)
        if name in ("", ".", ".."):
            directory = open_directory(path, purpose)
            return Entry(directory, ".", directory.st)
        directory = open_directory(head, purpose, create=make_parents)
        try:
            st = os.lstat(name, dir_fd=directory.fd)
        except FileNotFoundError:
            return Entry(directory, name, None)
        except BaseException:
            directory.close()
            raise
        if not stat.S_ISLNK(st.st_mode):
            return Entry(directory, name, st)
        try:
            target = _read_link(directory.fd, name, st, purpose, _join(directory.path, name))
        finally:
            directory.close()
        path = os.path.join(directory.path, target)
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))


# ---------------------------------------------------------------- writing a regular file


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "", socket.gethostname())[:24]


def temp_name(name: str) -> str:
    stem = name[:150]  # within NAME_MAX (255) with the rest of the name
    return f".{stem}.ppdsl-{_host()}-{os.getpid()}-{secrets.token_hex(4)}.tmp"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, and is another user's
        return True
    return True


def clean_stale_temporaries(directory: Directory, name: str) -> list[str]:
    """Remove the temporary files an earlier write of `name` left when its process was killed: ppdsl's names for
    it, from this host, of a process that is gone, regular files of this user, older than a minute."""
    removed: list[str] = []
    host, now = _host(), time.time()
    try:
        names = os.listdir(directory.fd)
    except OSError:
        return removed
    for other in names:
        m = _TEMP.match(other)
        if not m or m["name"] != name[:150] or m["host"] != host or _alive(int(m["pid"])):
            continue
        with contextlib.suppress(OSError):
            st = os.lstat(other, dir_fd=directory.fd)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and now - st.st_mtime > _STALE_SECONDS:
                os.unlink(other, dir_fd=directory.fd)
                removed.append(other)
    return removed


def _anonymous(directory: Directory) -> int | None:
    """A file in `directory` with no name (O_TMPFILE): nothing is left of it if the process dies. None where the
    kernel or file system has no such thing."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        return os.open(".", flag | os.O_RDWR | os.O_CLOEXEC, 0o666, dir_fd=directory.fd)
    except OSError as err:
        if err.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            return None
        raise


def _named_temporary(directory: Directory, name: str) -> tuple[int, str]:
    temp = temp_name(name)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(temp, flags, 0o666, dir_fd=directory.fd), temp


def _copy_to(fd: int, directory: Directory, temp: str) -> None:
    """What was written to the anonymous `fd`, copied into the new file `temp` (no /proc to link it by)."""
    os.lseek(fd, 0, os.SEEK_SET)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    out = os.open(temp, flags, 0o600, dir_fd=directory.fd)
    try:
        while chunk := os.read(fd, MiB):
            os.write(out, chunk)
        _copy_status(os.fstat(fd), fd, out)
        os.fsync(out)
    finally:
        os.close(out)


def _copy_status(old: os.stat_result, source_fd: int | None, fd: int) -> None:
    """Give the new file `fd` what the file it replaces had: its owner and group where permitted (root may; a
    user may give a group of theirs), its extended attributes (ACLs, labels), then its permission bits, setuid
    only if the owner was kept and setgid only if the group was (else they would grant someone else's rights)."""
    with contextlib.suppress(OSError):
        os.fchown(fd, old.st_uid, old.st_gid)
    with contextlib.suppress(OSError):
        os.fchown(fd, -1, old.st_gid)  # the owner could not be kept (not root): the group perhaps
    if source_fd is not None and hasattr(os, "listxattr"):
        with contextlib.suppress(OSError):
            for attr in os.listxattr(source_fd):
                with contextlib.suppress(OSError):
                    os.setxattr(fd, attr, os.getxattr(source_fd, attr))
    now = os.fstat(fd)
    mode = stat.S_IMODE(old.st_mode)
    if now.st_uid != old.st_uid:
        mode &= ~stat.S_ISUID
    if now.st_gid != old.st_gid:
        mode &= ~stat.S_ISGID
    os.fchmod(fd, mode)


def open_existing(directory: Directory, name: str, st: os.stat_result, flags: int, block: bool = False) -> int:
    """`name` opened without following a symlink, proven to be the file `st` described (not one swapped in).
    `block`: wait as `open` does (a FIFO opened for writing waits for its reader)."""
    flags |= os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC | (0 if block else os.O_NONBLOCK)
    fd = os.open(name, flags, dir_fd=directory.fd)
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise OSError(errno.ESTALE, f"`{name}` was replaced while it was being written")
    return fd


def check_replaceable(entry: Entry, purpose: str) -> None:
    """Refuse (E058) to replace another user's file in a shared directory: create-only there."""
    if entry.directory is None or entry.st is None or not entry.directory.shared:
        return
    if entry.st.st_uid != os.geteuid():
        raise _foreign_file(purpose, _join(entry.directory.path, entry.name), entry.st.st_uid)


@contextlib.contextmanager
def write_regular(entry: Entry, purpose: str) -> Iterator[BinaryIO]:
    """A binary file whose content becomes the regular file `entry` names (new, or replacing the file there) when
    the block ends without an exception; nothing changes otherwise. Atomic, except for a file with several hard
    links, which is rewritten in place so that it stays one file under all its names. OSError for a failure."""
    check_replaceable(entry, purpose)
    directory, name, old = entry.directory, entry.name, entry.st
    assert directory is not None
    if old is not None and old.st_nlink > 1:
        with _in_place(directory, name, old) as f:
            yield f
        return
    clean_stale_temporaries(directory, name)
    temp = None
    fd = _anonymous(directory)
    if fd is None:
        fd, temp = _named_temporary(directory, name)
    try:
        if old is not None:
            source = None
            with contextlib.suppress(OSError):
                source = open_existing(directory, name, old, os.O_RDONLY)
            try:
                _copy_status(old, source, fd)
            finally:
                if source is not None:
                    os.close(source)
        with os.fdopen(fd, "wb", closefd=False) as f:
            yield f
            f.flush()
            os.fsync(fd)
        _publish(fd, temp, directory, name, create_only=directory.shared and old is None)
        temp = None
    finally:
        os.close(fd)
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=directory.fd)


def _publish(fd: int, temp: str | None, directory: Directory, name: str, create_only: bool) -> None:
    """Give the written file its name: link the anonymous file to a temporary name beside the target, then
    rename that over the target (a rename replaces, a link cannot). In a shared directory, a new name is made by
    the link alone, which fails if someone made that name meanwhile. The temporary name never outlives a failure."""
    anonymous = temp is None
    temp = temp_name(name) if temp is None else temp
    dfd = directory.fd
    try:
        if anonymous:
            try:  # linkat(AT_SYMLINK_FOLLOW) of /proc/self/fd/N: no privilege, unlike AT_EMPTY_PATH
                os.link(f"/proc/self/fd/{fd}", temp, dst_dir_fd=dfd, follow_symlinks=True)
            except OSError:  # no /proc: copy what was written into a named file
                _copy_to(fd, directory, temp)
        if create_only:
            os.link(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            os.unlink(temp, dir_fd=dfd)
        else:
            os.rename(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dfd)
        raise


@contextlib.contextmanager
def _in_place(directory: Directory, name: str, old: os.stat_result) -> Iterator[BinaryIO]:
    """Rewrite a file with several hard links where it is: the whole new content is held until the block ends,
    then written over the old and the rest cut off. Not atomic (a crash in the write leaves part of each), but a
    failure in the block changes nothing, and every name keeps naming the one file."""
    buf = io.BytesIO()
    yield buf
    fd = open_existing(directory, name, old, os.O_WRONLY)
    try:
        data = memoryview(buf.getvalue())
        done = 0
        while done < len(data):
            done += os.pwrite(fd, data[done:], done)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def probe(directory: Directory, name: str) -> None:
    """Prove that a file can be made in `directory` (permission bits do not tell it all: a read-only mount, an
    ACL, a full disk's inodes) by making an empty one and removing it; OSError if not."""
    fd, temp = _named_temporary(directory, name)
    os.close(fd)
    os.unlink(temp, dir_fd=directory.fd)


def make_directory(directory: Directory, name: str, mode: int = 0o700) -> None:
    """A new directory `name` in `directory`, `mode` exactly (not less the umask): FileExistsError if the name is
    taken, so that what mkdir made is the caller's alone."""
    os.mkdir(name, mode, dir_fd=directory.fd)
    fd = os.open(name, _DIR_FLAGS, dir_fd=directory.fd)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
