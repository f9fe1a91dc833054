"""A user's `--model` module that imports paddle at its top trains as quietly as the built-in model (issue 30):
no `No ccache found` warning, no glog lines, which Paddle prints when it is imported before ppdsl silences it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed (pip install -e '.[test]')"
)

MODEL = """
import numpy as np
import paddle  # at the top, as users write it: before ppdsl has imported paddle


def build(ctx):
    with ctx.stage(0):
        x = ctx.data("x", [4, 8])
    h = x
    for s in range(ctx.num_stages):
        with ctx.stage(s):
            h = paddle.nn.functional.gelu(paddle.nn.Linear(8, 8)(h))  # Linear: glog's "not support input out tensor"
    with ctx.stage(ctx.num_stages - 1):
        return paddle.nn.functional.mse_loss(h, ctx.data("y", [4, 8]))


def make_batch(step, batch_size, seed):
    x = np.random.default_rng([seed, step]).standard_normal((batch_size, 4, 8)).astype("float32")
    return {"x": x, "y": np.sin(x)}
"""

GLOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d", re.M)  # `W1204 18:49:48.879930  6158 eager_utils.cc:...`


def test_a_user_model_importing_paddle_first_prints_no_paddle_noise(tmp_path):
    (tmp_path / "noisymod.py").write_text(MODEL)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GLOG_")}
    environ["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "ppdsl.cli", "run", "--model", "noisymod:build", "--pp", "2", "-m", "2", "--steps", "1"],
        cwd=tmp_path,
        capture_output=True,
        env=environ,
        text=True,
        timeout=300,
    )
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 0, shown
    assert "step    1  loss" in proc.stdout  # it trained
    assert "ccache" not in shown and not GLOG_LINE.search(shown), shown
