"""Fuzzing `--resume`: one real checkpoint, damaged in every way seen (13 kinds of traceback, a FIFO that hung, an
empty file that printed only `Aborted.`) and by hypothesis' byte flips and truncations. Each must end the command with
exit status 2 and an E-code error that names the file, with no traceback and no Python word in the output."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ppdsl.cli import app

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

runner = CliRunner()
COMMAND = ["run", "1f1b", "--pp", "2", "-m", "2", "--batch-size", "4", "--model", "tiny_mlp"]
# What must never reach a message: a traceback, exception or type names, Python's own values.
PYTHON_WORDS = re.compile(r"\b(Traceback|True|False|None|NoneType|BadZipFile|TokenError)\b|\b\w+(Error|Exception)\b")


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    """A real checkpoint: one step of a two-stage pipeline, two micro-batches."""
    directory = tmp_path_factory.mktemp("original")
    result = runner.invoke(app, [*COMMAND, "--steps", "1", "--save-dir", str(directory)])
    assert result.exit_code == 0, result.output
    return directory / "checkpoint.npz"


def _contents(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    return json.loads(str(arrays.pop("__meta__"))), arrays


def _savez(target: Path, meta, arrays: dict[str, np.ndarray]) -> None:
    extra = {} if meta is None else {"__meta__": np.array(meta if isinstance(meta, str) else json.dumps(meta))}
    np.savez(target, **extra, **arrays)


def _resumed(directory: Path, steps: int = 2):
    """Resume from `directory`; a read that hangs (a FIFO) fails the test instead of the suite."""
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("resuming hung"))
    signal.alarm(30)
    try:
        return runner.invoke(app, [*COMMAND, "--steps", str(steps), "--resume", str(directory)])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _assert_clean_refusal(result, named: Path) -> str:
    output = result.output + (result.stderr or "")
    assert result.exit_code == 2, output
    assert re.search(r"error\[E0\d\d\]", result.stderr), output
    assert not PYTHON_WORDS.search(output), output
    assert str(named) in result.stderr, output
    return result.stderr


# ---------------------------------------------------------------- each kind of damage, once


def _with_meta(**changes):
    def make(original: Path, target: Path) -> None:
        meta, arrays = _contents(original)
        _savez(target, {**meta, **changes}, arrays)

    return make


def _with_arrays(change):
    def make(original: Path, target: Path) -> None:
        meta, arrays = _contents(original)
        change(arrays)
        _savez(target, meta, arrays)

    return make


def _write(data: bytes):
    return lambda original, target: target.write_bytes(data)


def _truncated(fraction: float):
    return lambda original, target: target.write_bytes(original.read_bytes()[: int(original.stat().st_size * fraction)])


def _unclosed_shape(original: Path, target: Path) -> None:
    """An array header whose shape's `)` became `:` (numpy's parser raises a tokenizer error, not a ValueError)."""
    data = bytearray(original.read_bytes())
    start = data.index(b"'shape': (")
    data[data.index(b")", start)] = ord(":")
    target.write_bytes(bytes(data))


def _bare_npy(original: Path, target: Path) -> None:
    with open(target, "wb") as f:
        np.save(f, _contents(original)[1]["head"])


def _drop_meta(original: Path, target: Path) -> None:
    _savez(target, None, _contents(original)[1])


def _raw_meta(text: str):
    def make(original: Path, target: Path) -> None:
        _savez(target, text, _contents(original)[1])

    return make


def _pickled_array(original: Path, target: Path) -> None:
    meta, arrays = _contents(original)
    arrays["head"] = np.array([{"a": 1}], dtype=object)
    np.savez(target, __meta__=np.array(json.dumps(meta)), **arrays)


def _compressed_bomb(original: Path, target: Path) -> None:
    """A member that claims far more bytes than the file holds."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("head.npy", b"\0" * (64 << 20))


def _pop(name):
    return lambda arrays: arrays.pop(name)


def _set(name, make):
    return lambda arrays: arrays.__setitem__(name, make(arrays))


KINDS = {
    # the file itself
    "bad zip": (_write(b"PK\x03\x04 this is no archive"), "E061", "is damaged or truncated"),
    "not a zip at all": (_write(b"hello\n"), "E061", "is damaged or truncated"),
    "bare npy": (_bare_npy, "E061", "is a single array (`.npy`)"),
    "empty file": (_write(b""), "E061", "is empty"),
    "truncated to half": (_truncated(0.5), "E061", "is damaged or truncated"),
    "truncated to its last byte": (_truncated(0.9999), "E061", "is damaged or truncated"),
    "a deflated bomb": (_compressed_bomb, "E061", "declares"),
    "an array header cut open": (_unclosed_shape, "E061", "its array header is not valid"),
    # its metadata
    "no metadata": (_drop_meta, "E061", "has no metadata"),
    "metadata not JSON": (_raw_meta("{step: 1"), "E061", "has metadata that is not JSON"),
    "metadata deeply nested": (_raw_meta("[" * 50_000), "E061", "has metadata that is not JSON ppdsl writes"),
    "metadata too long": (_raw_meta(" " * 100_000), "E061", "has metadata of 100000 characters"),
    "metadata a list": (_raw_meta("[1, 2]"), "E061", "has metadata that is not a JSON object"),
    "negative step": (_with_meta(step=-1), "E061", "has a bad step `-1`"),
    "float step": (_with_meta(step=1.5), "E061", "has a bad step `1.5`"),
    "string step": (_with_meta(step="1"), "E061", 'has a bad step `"1"`'),
    "boolean step": (_with_meta(step=True), "E061", "has a bad step `true`"),
    "no step": (_with_meta(step=None), "E061", "has a bad step `null`"),
    "huge step": (_with_meta(step=10**30), "E037", f"is at step {10**30}, past the end of this run (--steps 2)"),
    "another seed": (_with_meta(seed=7), "E037", "seed `7` (this run: `0`)"),
    # its arrays
    "pickled objects": (_pickled_array, "E061", "has a bad array `head`"),
    "text array": (_with_arrays(_set("head", lambda a: np.array(["x"]))), "E061", "is not numeric"),
    "NaN": (_with_arrays(_set("head", lambda a: np.full_like(a["head"], np.nan))), "E060", "in `head`"),
    "infinity": (
        _with_arrays(_set("embedding", lambda a: np.full_like(a["embedding"], -np.inf))),
        "E060",
        "in `embedding`",
    ),
    "wrong dtype": (_with_arrays(_set("head", lambda a: a["head"].astype(np.float64))), "E037", "`head` is float64"),
    # the metadata lists the arrays written: a file without one, or with one more, is damaged
    "missing array": (_with_arrays(_pop("head")), "E061", "arrays, not the"),
    "extra array": (
        _with_arrays(_set("bogus", lambda a: np.zeros(3, np.float32))),
        "E061",
        "arrays, not the",
    ),
    "wrong shape": (_with_arrays(_set("head", lambda a: a["head"].T.copy())), "E037", "`head` has shape (64, 32)"),
}


@pytest.mark.e2e
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_of_damage_is_a_clean_error_naming_the_file(kind, original, tmp_path):
    make, code, fragment = KINDS[kind]
    directory = tmp_path / "ckpt"
    directory.mkdir()
    target = directory / "checkpoint.npz"
    make(original, target)
    stderr = _assert_clean_refusal(_resumed(directory), target)
    assert f"error[{code}]" in stderr and fragment in stderr, stderr


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink loop", "dangling symlink", "socket"])
def test_what_is_not_a_regular_file_is_refused_without_reading_it(kind, tmp_path):
    """A FIFO hung the command; a directory and a symlink loop were tracebacks."""
    directory = tmp_path / "ckpt"
    directory.mkdir()
    target = directory / "checkpoint.npz"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    elif kind == "symlink loop":
        target.symlink_to(target.name)
    elif kind == "dangling symlink":
        target.symlink_to("nowhere.npz")
    else:
        import socket

        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(target))
    stderr = _assert_clean_refusal(_resumed(directory), target)
    expected = {
        "fifo": "is a FIFO, not a file",
        "directory": "is a directory, not a file",
        "symlink loop": "is a symlink loop",
        "dangling symlink": "does not exist",
        "socket": "is a socket, not a file",
    }[kind]
    assert expected in stderr, stderr


# ---------------------------------------------------------------- random damage


@st.composite
def damage(draw, size: int, headers: list[int]):
    """A truncation, or a byte flipped anywhere, or in a member's headers (zip's and numpy's, where a flip is not
    caught by the member's CRC alone), or in the central directory at the end."""
    if draw(st.integers(0, 4)) == 0:
        return ("truncate", draw(st.integers(0, size - 1)), 0)
    at = draw(
        st.one_of(
            st.integers(0, size - 1),
            st.builds(lambda h, d: min(h + d, size - 1), st.sampled_from(headers), st.integers(0, 200)),
            st.integers(max(0, size - 8192), size - 1),
        )
    )
    return ("flip", at, draw(st.integers(1, 255)))


@pytest.mark.e2e
def test_random_byte_flips_and_truncations_are_clean_errors(original):
    """`--steps 0` makes every file that reads whole and belongs to this run a refusal too (it is at step 1, past the
    end), so each case ends before paddle: and such a file must hold exactly the original's arrays (every member has
    a CRC, so a flip can only land where it changes nothing)."""
    from ppdsl.runtime.checkpoint import read_checkpoint

    data = original.read_bytes()
    want = read_checkpoint(original).arrays
    with zipfile.ZipFile(original) as archive:
        headers = [info.header_offset for info in archive.infolist()]

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(damage(len(data), headers))
    def case(change):
        how, at, xor = change
        mutated = bytearray(data[:at]) if how == "truncate" else bytearray(data)
        if how == "flip":
            mutated[at] ^= xor
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "checkpoint.npz"
            target.write_bytes(bytes(mutated))
            stderr = _assert_clean_refusal(_resumed(Path(tmp), steps=0), target)
            if "past the end of this run" in stderr:
                got = read_checkpoint(target).arrays
                assert got.keys() == want.keys()
                assert all(np.array_equal(got[k], want[k]) for k in want), (how, at, xor)

    case()
