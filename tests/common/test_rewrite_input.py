"""`rewrite_input`, the one output allowed over an input (`ppdsl fmt`): only the regular file that was read."""

from __future__ import annotations

import os

import pytest

from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.common.files import SCHEDULE_BYTES, forget_inputs, read_text, rewrite_input, write_output


@pytest.fixture(autouse=True)
def _fresh():
    forget_inputs()
    yield
    forget_inputs()


def test_the_file_read_is_replaced_and_the_other_inputs_stay_protected(tmp_path):
    path, other = tmp_path / "a.sched", tmp_path / "b.sched"
    path.write_text("old")
    other.write_text("other")
    read_text(path, SCHEDULE_BYTES)
    read_text(other, SCHEDULE_BYTES)
    rewrite_input(path, "new")
    assert path.read_text() == "new"
    with pytest.raises(DiagnosticError) as caught:
        write_output(other, "x")
    assert caught.value.diagnostics[0].code == "E050"


def test_a_file_moved_to_the_name_since_it_was_read_is_not_written(tmp_path):
    path, swapped = tmp_path / "a.sched", tmp_path / "swapped"
    path.write_text("read")
    read_text(path, SCHEDULE_BYTES)
    swapped.write_text("someone else's")
    os.replace(swapped, path)
    with pytest.raises(DiagnosticError) as caught:
        rewrite_input(path, "formatted")
    assert caught.value.diagnostics[0].code == "E053"
    assert "not the file that was read" in caught.value.diagnostics[0].message
    assert path.read_text() == "someone else's"


def test_a_fifo_swapped_in_is_not_written(tmp_path):
    path = tmp_path / "a.sched"
    path.write_text("read")
    read_text(path, SCHEDULE_BYTES)
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(DiagnosticError) as caught:
        rewrite_input(path, "formatted")  # opening the FIFO to write would wait for a reader for ever
    assert caught.value.diagnostics[0].code == "E053" and "FIFO" in caught.value.diagnostics[0].message
