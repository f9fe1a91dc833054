"""The install (issue 19): README's first command installs only what `ppdsl run` needs, its second the test extras,
both exactly as `.ci/run` runs them, and both resolve against `constraints.txt` without backtracking."""

from __future__ import annotations

import re

import tomllib

from paths import ROOT

COMMAND = re.compile(r"^(pip install .*?) && (.+?)\s*(#.*)?$")


def _readme_commands() -> list[str]:
    """The lines of the README's first code block, comments dropped."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def _ci_commands() -> list[str]:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.startswith("pip install")]


def _extras(command: str) -> set[str]:
    found = re.search(r"'\.\[([^\]]*)\]'", command)
    return set(found.group(1).split(",")) if found else set()


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_readme_starts_with_the_two_commands_ci_runs():
    readme = _readme_commands()
    assert len(readme) == 2 and all(COMMAND.match(line) for line in readme), readme
    assert _ci_commands() == readme


def test_first_command_installs_only_what_run_needs():
    first, second = _readme_commands()
    assert first.endswith("&& ppdsl run")
    assert _extras(first) <= {"paddle"}, "torch, PaddleFormers and the test tools are not needed to run"
    assert {"test"} <= _extras(second) and second.endswith("&& python -m pytest")


def test_every_install_uses_the_constraints_and_they_pin_every_requirement():
    """pip backtracked through 35 versions of `datasets` without pins: every direct requirement, base and extras,
    has exactly one version in constraints.txt, and that version satisfies pyproject's own bound."""
    assert all("-c constraints.txt" in line for line in _readme_commands())
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: `{line}` is not an exact pin"
            pins[_name(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    missing = sorted({_name(r) for r in requirements} - set(pins))
    assert not missing, f"constraints.txt pins no version of {missing}"
    for requirement in requirements:
        exact = re.search(r"==\s*([\w.]+)", requirement)
        if exact:
            assert pins[_name(requirement)].startswith(exact.group(1)), requirement
