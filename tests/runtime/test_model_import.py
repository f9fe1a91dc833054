"""`--model module:function` is found in the folder the command was typed in, by one process and by every rank,
after the standard library and installed packages: a `json.py` there never runs (it did in the launcher and
each rank, which had the current directory first on their path)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ppdsl.runtime.builtin_models import load_model

from paths import ROOT, TESTS

PADDLE = importlib.util.find_spec("paddle") is not None
# The console script pip writes: run as a file, so sys.path[0] is its bin folder, not the current directory.
CONSOLE_SCRIPT = "import sys\nfrom ppdsl.cli import main\nsys.exit(main())\n"
SHADOW = "open('json_shadow_ran', 'a').write('ran\\n')\n"  # a json.py in the user's folder


@pytest.fixture
def user_folder(tmp_path: Path) -> Path:
    """A folder with a model module of the README's shape (`mymlp.py`) and a `json.py` that leaves a marker."""
    folder = tmp_path / "mydir"
    folder.mkdir()
    shutil.copy(TESTS / "models" / "user_mlp.py", folder / "mymlp.py")
    (folder / "json.py").write_text(SHADOW, encoding="utf-8")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ppdsl").write_text(CONSOLE_SCRIPT, encoding="utf-8")
    return folder


def _ppdsl(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this ppdsl, as an installed console script would import it
    command = [sys.executable, str(folder.parent / "bin" / "ppdsl"), *args]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def test_the_model_folder_is_searched_last_and_only_while_the_model_imports(tmp_path, monkeypatch):
    (tmp_path / "mymlp.py").write_text((TESTS / "models" / "user_mlp.py").read_text())
    (tmp_path / "tabnanny.py").write_text("def check(ctx):\n    raise AssertionError('the folder shadowed')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "mymlp", raising=False)
    monkeypatch.delitem(sys.modules, "tabnanny", raising=False)
    assert load_model("mymlp:build").make_batch is not None  # found in the current folder
    # a module of the standard library with the same name as one in the folder is the standard library's
    assert Path(load_model("tabnanny:check").build.__code__.co_filename).parent != tmp_path
    assert str(tmp_path) not in sys.path
    monkeypatch.delitem(sys.modules, "mymlp")
    assert load_model("mymlp:build", model_dir=tmp_path).name == "mymlp:build"  # as a rank is told by its spec


@pytest.mark.skipif(not PADDLE, reason="paddlepaddle is not installed")
def test_a_model_in_the_current_folder_runs_from_a_console_script_and_json_py_does_not(user_folder):
    run = _ppdsl(user_folder, "run", "--model", "mymlp:build", "--pp", "2", "-m", "2", "--steps", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "mymlp:build" in run.stdout
    assert not (user_folder / "json_shadow_ran").exists()


@pytest.mark.e2e
@pytest.mark.skipif(not PADDLE, reason="paddlepaddle is not installed")
def test_every_rank_finds_the_model_and_neither_launcher_nor_rank_runs_json_py(user_folder, tmp_path):
    args = ["run", "--model", "mymlp:build", "--pp", "2", "-m", "2", "--steps", "1", "--nproc-per-node", "2"]
    run = _ppdsl(user_folder, *args, "--run-dir", str(tmp_path / "run"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert not (user_folder / "json_shadow_ran").exists()


@pytest.mark.parametrize(
    ("spec", "advice"),
    [
        ("mymod.py:build", "write `--model mymod:build`"),
        ("models/mymod.py:build", "write `--model mymod:build`, from the folder `models`"),
    ],
)
def test_a_files_path_for_a_module_is_told_the_module_name(spec, advice):
    """`--model mymod.py:build` was "No module named 'mymod.py'" with no hint."""
    from ppdsl.common.diagnostics import DiagnosticError
    from ppdsl.runtime.builtin_models import split_model_name

    with pytest.raises(DiagnosticError) as err:
        split_model_name(spec)
    (diag,) = err.value.diagnostics
    assert diag.code == "E031" and "names a file" in diag.message and advice in diag.help
    assert split_model_name("examples.paddleformers_llama:build") == ("examples.paddleformers_llama", "build")
