"""The save directory's lock and files (ppdsl/runtime/checkpoint.py), without paddle: a second run is refused while
the first holds the lock, a killed run's lock is gone, a planted symlink is not followed, and a rank deletes only its
own older checkpoint files."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.runtime.checkpoint import lock_save_dir, prune_rank_checkpoints, resume_files

from paths import ROOT

HOLD_LOCK = (
    "import sys, time\n"
    "from ppdsl.runtime.checkpoint import lock_save_dir\n"
    "with lock_save_dir(sys.argv[1]):\n"
    "    print('locked', flush=True)\n"
    "    time.sleep(120)\n"
)


def _code(err: DiagnosticError) -> str:
    return err.diagnostics[0].code


def test_the_lock_of_a_run_killed_with_sigkill_is_released(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / "ckpt")], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(DiagnosticError) as refused, lock_save_dir(tmp_path / "ckpt"):
            pass
        assert _code(refused.value) == "E063"
        assert "another run is saving checkpoints into" in refused.value.diagnostics[0].message
    finally:
        holder.kill()  # SIGKILL: no cleanup code runs in the holder
        holder.wait(timeout=30)
    with lock_save_dir(tmp_path / "ckpt"):  # the lock died with its process: no stale lock to remove by hand
        pass


def test_a_planted_symlink_for_the_lock_file_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / ".ppdsl.lock").symlink_to(victim)
    with pytest.raises(DiagnosticError) as refused, lock_save_dir(tmp_path / "ckpt"):
        pass
    assert _code(refused.value) == "E000" and "is a symlink" in refused.value.diagnostics[0].message
    assert victim.read_text() == "precious\n"


def test_a_rank_deletes_only_its_own_older_checkpoint_files(tmp_path):
    names = [
        "checkpoint.step1.rank0.npz",
        "checkpoint.step2.rank0.npz",
        "checkpoint.step3.rank0.npz",
        "checkpoint.step1.rank1.npz",
        "checkpoint.step1.rank0.npz.bak",  # not a name ppdsl writes
        "ranking.json",
    ]
    for name in names:
        (tmp_path / name).write_text("x")
    prune_rank_checkpoints(tmp_path, 0, {2, 3})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(set(names) - {"checkpoint.step1.rank0.npz"})


def test_one_process_does_not_resume_from_the_files_of_a_multi_process_run(tmp_path):
    """A rank's file holds trained values only for its own stages' parameters."""
    (tmp_path / "checkpoint.step4.rank0.npz").write_text("x")
    (tmp_path / "checkpoint.step4.rank1.npz").write_text("x")
    with pytest.raises(DiagnosticError) as refused:
        resume_files(tmp_path, None)
    assert "holds the per-rank checkpoints of a multi-process run" in refused.value.diagnostics[0].message
    assert resume_files(tmp_path, [0, 1]) == {
        0: (tmp_path / "checkpoint.step4.rank0.npz", 4),
        1: (tmp_path / "checkpoint.step4.rank1.npz", 4),
    }


def test_a_checkpoint_missing_a_member_is_damaged_though_each_member_is_whole(tmp_path):
    """A flip in a zip's central directory can hide whole members while every member left passes its CRC (found by
    the byte-flip fuzz: `('flip', 656557, 8)` read as whole with the optimizer's arrays gone): the metadata lists the
    arrays, and a file without one of them is E061."""
    import zipfile

    import numpy as np

    from ppdsl.runtime.checkpoint import read_checkpoint, write_checkpoint

    whole = tmp_path / "checkpoint.npz"
    write_checkpoint(whole, 3, {"schedule": "1F1B"}, {"w": np.ones(3), "b": np.zeros(2), "lr": np.array(0.1)})
    assert sorted(read_checkpoint(whole).arrays) == ["b", "lr", "w"]
    short = tmp_path / "short.npz"
    with zipfile.ZipFile(whole) as src, zipfile.ZipFile(short, "w") as dst:
        for info in src.infolist():
            if info.filename != "lr.npy":
                dst.writestr(info, src.read(info))
    with pytest.raises(DiagnosticError) as refused:
        read_checkpoint(short)
    (diag,) = refused.value.diagnostics
    assert diag.code == "E061" and "holds 2 arrays, not the 3 its metadata lists" in diag.message
