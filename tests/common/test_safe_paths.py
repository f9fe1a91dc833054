"""Writing where other users share the machine (ppdsl/common/safe_paths.py, under files.py's writer): another
user's symlink is never followed, a directory another user can change is refused, a shared sticky directory is
create-only, and a replaced file keeps its mode, owner, extended attributes and hard links.

Tests run as root; another user is simulated by `os.chown` / `os.lchown` to a uid with no account."""

from __future__ import annotations

import os
import stat

import pytest

from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.common.files import forget_inputs, new_owned_directory, trusted_directory, write_output

OTHER = 12345  # a uid with no account: "another user"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's files needs root")


@pytest.fixture(autouse=True)
def _no_inputs_yet():
    forget_inputs()
    yield
    forget_inputs()


def refused(path, data="x", **kwargs) -> tuple[str, str, str]:
    with pytest.raises(DiagnosticError) as err:
        write_output(path, data, **kwargs)
    (d,) = err.value.diagnostics
    return d.code, d.message, d.help


@pytest.fixture
def victim(tmp_path):
    """A root-owned file outside the directories written to, which no output may reach."""
    (tmp_path / "etc").mkdir()
    path = tmp_path / "etc" / "precious.conf"
    path.write_text("root's own")
    return path


def test_another_users_symlink_is_not_followed_in_any_directory(tmp_path, victim):
    """Not only in a sticky directory (which `fs.protected_symlinks` would cover when it is on): a link another
    user left anywhere, here in a directory of root's, is refused by its owner."""
    work = tmp_path / "work"
    work.mkdir()
    planted = work / "plan_1f1b.py"
    planted.symlink_to(victim)
    os.lchown(planted, OTHER, OTHER)
    code, message, help = refused(planted)
    assert code == "E058" and f"`{planted}` is a symlink of uid {OTHER}" in message, message
    assert "remove the link" in help
    assert victim.read_text() == "root's own" and planted.is_symlink()


def test_another_users_symlink_on_the_way_to_the_directory_is_not_followed(tmp_path, victim):
    work = tmp_path / "work"
    work.mkdir()
    (work / "out").symlink_to(victim.parent)
    os.lchown(work / "out", OTHER, OTHER)
    code, message, _ = refused(work / "out" / "precious.conf")
    assert code == "E058" and f"`{work / 'out'}` is a symlink of uid {OTHER}" in message
    assert victim.read_text() == "root's own"


def test_ones_own_symlink_is_followed_and_its_target_replaced(tmp_path, victim):
    link = tmp_path / "link.conf"
    link.symlink_to(victim)
    write_output(link, "new")
    assert victim.read_text() == "new" and link.is_symlink()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: os.chown(d, OTHER, OTHER), f"is owned by uid {OTHER}"),
        (lambda d: d.chmod(0o777), "can be written by every user"),
        (lambda d: (os.chown(d, 0, OTHER), d.chmod(0o775)), f"can be written by group {OTHER}"),
    ],
    ids=["owned", "world-writable", "group-writable"],
)
def test_a_directory_another_user_can_change_is_refused(tmp_path, change, why):
    """`ppdsl compile 1f1b` (no `-o`) in a directory another user can write: they could plant `plan_1f1b.py`
    between any check and the write, so the directory is refused, naming it, its owner and the fix."""
    work = tmp_path / "work"
    work.mkdir()
    change(work)
    code, message, help = refused(work / "plan_1f1b.py")
    assert code == "E054" and f"its directory `{work}` {why}" in message, message
    assert f"chown root {work}" in help and f"chmod go-w {work}" in help
    assert os.listdir(work) == []


def test_a_shared_sticky_directory_is_create_only(tmp_path, victim):
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    write_output(shared / "new.json", "{}")  # a new name: made
    assert (shared / "new.json").read_text() == "{}"
    write_output(shared / "new.json", "[]")  # one's own file: replaced
    assert (shared / "new.json").read_text() == "[]"
    theirs = shared / "theirs.json"
    theirs.write_text("their data")
    os.chown(theirs, OTHER, OTHER)
    code, message, _ = refused(theirs)
    assert code == "E058" and f"`{theirs}` is a file of uid {OTHER} in a directory others share" in message
    assert theirs.read_text() == "their data"


def test_a_replaced_file_keeps_its_owner_group_and_setuid_bits(tmp_path):
    """Root rewriting another user's file (their `fmt` target, say) leaves it theirs, with its mode whole."""
    path = tmp_path / "tool.py"
    path.write_text("old")
    os.chown(path, OTHER, OTHER)
    os.chmod(path, 0o6750)  # chmod after chown: chown clears setuid
    write_output(path, "new")
    st = path.stat()
    assert path.read_text() == "new"
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OTHER, OTHER, 0o6750)


def test_setuid_is_dropped_when_the_owner_cannot_be_kept(tmp_path, monkeypatch):
    path = tmp_path / "tool.py"
    path.write_text("old")
    os.chown(path, OTHER, OTHER)
    os.chmod(path, 0o6755)

    def no_chown(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchown", no_chown)  # as for a user who is not root
    write_output(path, "new")
    st = path.stat()
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o755, oct(st.st_mode)


def test_a_replaced_file_keeps_its_extended_attributes(tmp_path):
    path = tmp_path / "labelled.json"
    path.write_text("{}")
    try:
        os.setxattr(path, "user.ppdsl-test", b"kept")
    except OSError as err:
        pytest.skip(f"this file system has no user extended attributes: {err.strerror}")
    write_output(path, "[]")
    assert path.read_text() == "[]" and os.getxattr(path, "user.ppdsl-test") == b"kept"


def test_a_file_with_several_hard_links_is_rewritten_in_place(tmp_path):
    """Replacing it by a rename would leave the other names holding the old text: rewritten in place instead
    (not atomic, as the docs say), so every name keeps naming the one file."""
    path = tmp_path / "plan.py"
    path.write_text("the old content, longer than the new")
    os.link(path, tmp_path / "other-name.py")
    inode = path.stat().st_ino
    write_output(path, "new")
    assert path.stat().st_ino == inode and path.stat().st_nlink == 2
    assert (tmp_path / "other-name.py").read_text() == "new" == path.read_text()
    assert sorted(os.listdir(tmp_path)) == ["other-name.py", "plan.py"]


def test_a_run_directory_under_another_users_directory_is_refused(tmp_path):
    """The ranks reopen a launch's files by name: a directory above the run directory that another user can
    change lets them swap `spec.json` under the ranks, so every directory up to `/` is checked, as ssh checks
    `~/.ssh`."""
    theirs = tmp_path / "home-of-someone"
    (theirs / "ppdsl-run").mkdir(parents=True)
    os.chown(theirs, OTHER, OTHER)
    with pytest.raises(DiagnosticError) as err:
        new_owned_directory(theirs / "ppdsl-run", "launch-")
    (d,) = err.value.diagnostics
    assert d.code == "E054" and f"`{theirs}`, a directory above it, is owned by uid {OTHER}" in d.message, d.message
    assert os.listdir(theirs / "ppdsl-run") == []


def test_a_run_directory_another_user_made_is_refused(tmp_path):
    run_dir = tmp_path / "ppdsl-run"
    run_dir.mkdir()
    os.chown(run_dir, OTHER, OTHER)
    with pytest.raises(DiagnosticError) as err:
        new_owned_directory(run_dir, "launch-")
    assert [d.code for d in err.value.diagnostics] == ["E054"]
    assert "use --run-dir" in err.value.diagnostics[0].message


def test_a_launch_directory_is_made_private(tmp_path):
    umask = os.umask(0)  # whatever the umask, only the user may enter a launch's directory
    try:
        made = new_owned_directory(tmp_path / "ppdsl-run", "launch-")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(made.stat().st_mode) == 0o700 and made.name == "launch-1"


def test_a_trusted_directory_in_a_shared_one_is_accepted(tmp_path):
    """/tmp/mine (root's, in a sticky /tmp): nobody else may rename or remove it, so it is safe."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    with trusted_directory(shared / "mine", "--save-dir") as directory:
        assert directory.path == str(shared / "mine") and not directory.shared
