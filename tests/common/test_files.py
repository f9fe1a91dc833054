"""The one reader and the one writer (ppdsl/common/files.py): inputs are regular files under a size cap, refused at
once otherwise; outputs never replace a device, a FIFO, a symlink's directory entry or an input, and leave no
temporary file, even after a kill -9."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time

import pytest

from ppdsl.common import files, safe_paths
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.common.files import (
    InputError,
    check_output,
    clean_stale_temporaries,
    forget_inputs,
    new_owned_directory,
    open_output,
    read_input,
    read_input_text,
    read_text,
    record_input,
    write_output,
)


@pytest.fixture(autouse=True)
def _no_inputs_yet():
    forget_inputs()
    yield
    forget_inputs()


def within(seconds: float, fn, *args):
    """Run fn(*args) in a thread; fail (instead of hanging the suite) if it has not returned in time."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as err:  # handed to the test
            box["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn.__name__} still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def codes(err: DiagnosticError) -> list[str]:
    return [d.code for d in err.diagnostics]


# ---------------------------------------------------------------- reading


def test_a_fifo_is_refused_at_once_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe.sched"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as err:
        within(2, read_input, fifo, 1000)
    assert err.value.code == "E051" and "a FIFO, not a regular file" in err.value.reason


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused_at_once(device):
    with pytest.raises(InputError) as err:
        within(2, read_input, device, files.SCHEDULE_BYTES)
    assert err.value.code == "E051" and "a character device" in err.value.reason


def test_a_directory_input_is_refused(tmp_path):
    with pytest.raises(DiagnosticError) as err:
        read_text(tmp_path, 1000)
    assert codes(err.value) == ["E051"]
    assert f"cannot read `{tmp_path}`: a directory, not a regular file" in err.value.diagnostics[0].message


def test_a_file_over_the_cap_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 101)
    with pytest.raises(DiagnosticError) as err:
        read_text(big, 100, "E008", "cost file ")
    assert codes(err.value) == ["E052"]
    assert "larger than the 100 bytes ppdsl reads (101 bytes)" in err.value.diagnostics[0].message
    assert read_text(big, 101) == " " * 101


def test_the_caps_are_stated():
    assert files.SCHEDULE_BYTES == 16 * 2**20 and files.COSTS_BYTES == 2**20
    assert files.CSV_BYTES == files.PROFILE_BYTES == 64 * 2**20


def test_a_byte_order_mark_is_dropped_and_other_bytes_are_a_clean_error(tmp_path):
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf0F0,0B0\n")
    assert read_input_text(bom, 100) == "0F0,0B0\n"
    latin = tmp_path / "latin.sched"
    latin.write_bytes(b"order {\n  forward # caf\xe9\n}\n")
    with pytest.raises(DiagnosticError) as err:
        read_text(latin, 100)
    assert codes(err.value) == ["E000"]
    assert "not UTF-8 text (byte 0xe9 on line 2)" in err.value.diagnostics[0].message


def test_a_missing_file_takes_the_callers_code(tmp_path):
    with pytest.raises(DiagnosticError) as err:
        read_text(tmp_path / "none.json", 100, "E008", "cost file ")
    assert codes(err.value) == ["E008"]
    assert "cannot read cost file `" in err.value.diagnostics[0].message


# ---------------------------------------------------------------- writing: what is at the target


def char_device(tmp_path, name: str) -> str:
    """/dev/null or /dev/full made in tmp_path where allowed (as root, a wrong writer would turn the real one into a
    regular file and break the machine), else the real one."""
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, {"null": 3, "full": 7}[name]))
        with open(node, "wb"):  # a file system mounted nodev refuses to open it
            pass
        return str(node)
    except OSError:
        if node.exists():
            node.unlink()
        return f"/dev/{name}"


def test_a_character_device_is_written_through_and_stays_a_device(tmp_path):
    device = char_device(tmp_path, "null")
    before = set(os.listdir(os.path.dirname(device)))
    write_output(device, "plan text\n")
    assert stat.S_ISCHR(os.stat(device).st_mode)
    assert set(os.listdir(os.path.dirname(device))) == before, "no temporary file beside a device"


def test_dev_full_is_a_clean_error(tmp_path):
    full = char_device(tmp_path, "full")
    with pytest.raises(DiagnosticError) as err:
        write_output(full, "x" * 10000)
    assert codes(err.value) == ["E053"]
    assert err.value.diagnostics[0].message == f"cannot write `{full}`: No space left on device"
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_a_fifo_is_written_through_to_its_reader(tmp_path):
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    within(5, write_output, fifo, "through the pipe")
    reader.join(5)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_a_directory_output_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(DiagnosticError) as err:
        write_output(tmp_path / "d", "x")
    assert codes(err.value) == ["E053"] and "it is a directory" in err.value.diagnostics[0].message
    assert os.listdir(tmp_path / "d") == []


def test_a_symlink_has_its_target_replaced_and_stays_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    target = tmp_path / "real" / "plan.py"
    target.write_text("old")
    link = tmp_path / "links" / "plan.py"
    link.symlink_to(target)
    write_output(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"
    assert sorted(os.listdir(tmp_path / "links")) == ["plan.py"]
    assert sorted(os.listdir(tmp_path / "real")) == ["plan.py"]


def test_a_replaced_file_keeps_its_permissions_and_a_new_one_follows_the_umask(tmp_path):
    old = tmp_path / "private.json"
    old.write_text("{}")
    old.chmod(0o600)
    write_output(old, "[]")
    assert stat.S_IMODE(old.stat().st_mode) == 0o600 and old.read_text() == "[]"
    umask = os.umask(0o022)
    try:
        write_output(tmp_path / "new.json", "[]")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644


def test_a_failed_block_leaves_the_old_file_and_nothing_else(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old")
    with pytest.raises(RuntimeError), open_output(out) as f:
        f.write(b"half")
        raise RuntimeError("the drawing failed")
    assert out.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["out.txt"]


def test_a_missing_directory_is_a_clean_error(tmp_path):
    with pytest.raises(DiagnosticError) as err:
        write_output(tmp_path / "no" / "such.py", "x")
    message = err.value.diagnostics[0].message
    assert codes(err.value) == ["E000"] and message.endswith(f"`{tmp_path / 'no'}` does not exist"), message
    with pytest.raises(DiagnosticError) as err:
        (tmp_path / "a_file").write_text("")
        write_output(tmp_path / "a_file" / "such.py", "x")
    message = err.value.diagnostics[0].message
    assert message.endswith(f"`{tmp_path / 'a_file'}` is not a directory"), message
    write_output(tmp_path / "made" / "here.py", "x", make_parents=True)
    assert (tmp_path / "made" / "here.py").read_text() == "x"


def test_dash_is_stdout(capfd):
    write_output("-", b"to stdout")
    assert capfd.readouterr().out == "to stdout"


# ---------------------------------------------------------------- an output is never an input


def test_an_input_read_is_never_overwritten(tmp_path):
    schedule = tmp_path / "x.sched"
    schedule.write_text("order { forward }")
    read_input(schedule, 1000)
    with pytest.raises(DiagnosticError) as err:
        write_output(schedule, "plan")
    assert codes(err.value) == ["E050"]
    assert f"the output `{schedule}` is the input `{schedule}`" in err.value.diagnostics[0].message
    with pytest.raises(DiagnosticError):
        check_output(schedule)  # before any work, too
    assert schedule.read_text() == "order { forward }"


@pytest.mark.parametrize("alias", ["symlink", "hardlink"])
def test_the_same_file_by_another_name_is_the_input(alias, tmp_path):
    schedule = tmp_path / "x.sched"
    schedule.write_text("order { forward }")
    other = tmp_path / "other.sched"
    other.symlink_to(schedule) if alias == "symlink" else os.link(schedule, other)
    read_input(other, 1000)
    with pytest.raises(DiagnosticError) as err:
        write_output(schedule, "plan")
    message = err.value.diagnostics[0].message
    assert f"`{schedule}` is the input `{other}` (the same file by another name)" in message
    assert schedule.read_text() == "order { forward }"


def test_the_record_is_per_command_and_forgets_deleted_files(tmp_path):
    used = tmp_path / "used.json"
    used.write_text("{}")
    record_input(used)
    forget_inputs()
    write_output(used, "[]")  # another command: not its input
    temp = tmp_path / "temp.sched"
    temp.write_text("x")
    read_input(temp, 10)
    temp.unlink()  # its inode number may be reused by the next file made here
    fresh = tmp_path / "fresh.json"
    fresh.write_text("{}")
    write_output(fresh, "[]")
    assert fresh.read_text() == "[]"


# ---------------------------------------------------------------- temporary files


KILLED_WRITER = """
import sys, time
from ppdsl.common.files import open_output
with open_output(sys.argv[1]) as f:
    f.write(b"x" * 100000)
    print("writing", flush=True)
    time.sleep(60)
"""


def test_a_writer_killed_mid_write_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "plan.py"
    out.write_text("old")
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "writing\n"
    finally:
        proc.kill()
        proc.wait(10)
    assert out.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["plan.py"], "a temporary file outlived its process"


def test_without_o_tmpfile_a_dead_writers_named_temporary_is_cleaned(tmp_path, monkeypatch):
    monkeypatch.setattr(safe_paths, "_anonymous", lambda directory: None)  # a file system without O_TMPFILE
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "plan.py"
    stale = tmp_path / f".plan.py.ppdsl-{safe_paths._host()}-{dead.pid}-0badc0de.tmp"
    stale.write_text("left by a kill -9")
    alive = tmp_path / f".plan.py.ppdsl-{safe_paths._host()}-{os.getpid()}-feedf00d.tmp"
    alive.write_text("a write still going on")
    users = tmp_path / ".plan.py.mine.tmp"
    users.write_text("not ppdsl's")
    an_hour_ago = time.time() - 3600
    for path in (stale, alive, users):
        os.utime(path, (an_hour_ago, an_hour_ago))
    write_output(out, "new")
    assert out.read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == sorted([alive.name, users.name, "plan.py"])
    assert clean_stale_temporaries(out) == []


# ---------------------------------------------------------------- directories ppdsl owns


def test_an_owned_directory_is_new_and_never_one_of_the_users(tmp_path):
    (tmp_path / "launch-2").mkdir()  # the user's, or an earlier launch's: never reused
    (tmp_path / "launch-x").mkdir()
    first = new_owned_directory(tmp_path, "launch-")
    second = new_owned_directory(tmp_path, "launch-")
    assert (first.name, second.name) == ("launch-3", "launch-4")
    assert os.listdir(tmp_path / "launch-2") == []


REDIRECTED = """
from ppdsl.common.files import write_output
print("before", flush=True)
write_output("/dev/stdout", "data\\n")
print("after")
"""


def test_dev_stdout_redirected_to_a_file_is_written_through_the_redirection(tmp_path):
    """`-o /dev/stdout > log`: the data lands between what the command printed, in the shell's file, which is
    never replaced (a rename would cut the redirection)."""
    log = tmp_path / "log"
    with open(log, "w") as f:
        inode = os.fstat(f.fileno()).st_ino
        subprocess.run([sys.executable, "-c", REDIRECTED], stdout=f, check=True, timeout=30)
    assert log.read_text() == "before\ndata\nafter\n"
    assert log.stat().st_ino == inode and sorted(os.listdir(tmp_path)) == ["log"]


def test_another_users_symlink_in_a_shared_directory_is_not_followed(tmp_path):
    """As root, `-o /tmp/x` where another user planted /tmp/x -> /etc/passwd must not replace /etc/passwd."""
    if os.geteuid() != 0:
        pytest.skip("making another user's symlink needs root")
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0")
    planted = shared / "out.json"
    planted.symlink_to(victim)
    os.lchown(planted, 12345, 12345)
    with pytest.raises(DiagnosticError) as err:
        write_output(planted, "{}")
    assert codes(err.value) == ["E058"] and "is a symlink of uid 12345" in err.value.diagnostics[0].message
    assert victim.read_text() == "root:x:0:0"
    os.lchown(planted, 0, 0)  # one's own link is followed
    write_output(planted, "{}")
    assert victim.read_text() == "{}" and planted.is_symlink()


def test_without_proc_the_anonymous_file_is_copied_to_its_name(tmp_path, monkeypatch):
    def no_proc(src, dst, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", src)

    monkeypatch.setattr(os, "link", no_proc)
    write_output(tmp_path / "out.json", "[1]")
    assert (tmp_path / "out.json").read_text() == "[1]" and sorted(os.listdir(tmp_path)) == ["out.json"]


def test_check_output_tries_the_directory_and_names_the_flag(tmp_path, monkeypatch):
    """The permission bits do not tell it all (a read-only mount, an ACL; root passes every `os.access`): the
    directory is tried by making a file there, which `ppdsl run` did in a copy of its own (now this one function)."""
    import errno

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(safe_paths, "_named_temporary", read_only)
    with pytest.raises(DiagnosticError) as err:
        check_output(tmp_path / "summary.json", "--summary-json")
    (d,) = err.value.diagnostics
    assert (d.code, d.message) == (
        "E000",
        f"cannot write --summary-json `{tmp_path / 'summary.json'}`: Read-only file system",
    )
    monkeypatch.undo()
    check_output(tmp_path / "summary.json")
    assert list(tmp_path.iterdir()) == [], "the probe left a file behind"


def test_an_owned_directory_ignores_names_with_other_digits(tmp_path):
    """`launch-²` is `isdigit()` but no int: a planted one made every multi-process run a traceback."""
    (tmp_path / "launch-²").mkdir()
    (tmp_path / "launch-٣").mkdir()  # an Arabic-Indic three
    assert new_owned_directory(tmp_path, "launch-").name == "launch-1"
