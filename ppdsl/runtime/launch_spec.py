"""What a launch hands its ranks, and how a rank makes sure it is what its launcher wrote.

`ppdsl run --nproc-per-node` writes two files into the launch's own directory: the plan specification of the
checked schedule (`plan.json`) and the launch's spec (`spec.json`, a `LaunchSpec`: the run's options, where the
plan is and its sha256, the fingerprint of the schedule checked, the `--model` module's source files and their
sha256, the checkpoints to resume). Every rank is started with the sha256 of `spec.json` on its command line
(`worker.py SPEC SHA256`), which only the launcher can set. A rank reads each file once (`O_NOFOLLOW`: a symlink
put in the file's place is refused; a regular file only; at most a stated size), checks the bytes against the
digest before it parses them, and builds from those bytes alone: `spec.json` against the command line, `plan.json`
and the model's source files against the spec. The model module is run from the bytes checked, never imported
again by its path, so a file swapped between the check and the import cannot run. Anything else is refused
(E045 for the launch's files, E049 for a model file), never trusted.

No paddle here.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import importlib.util
import json
import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.files import MODEL_SOURCE_BYTES, PLAN_BYTES, SPEC_BYTES, write_output
from ppdsl.common.regular_files import TooLarge, kind, read_capped
from ppdsl.common.text import ascii_number
from ppdsl.runtime.request import RunRequest

SPEC_NAME, PLAN_NAME = "spec.json", "plan.json"
FAILURE_MODES = ("raise", "hang", "exit", "kill")
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_REWRITTEN_HELP = (
    "another process changed the launch's directory while its ranks started: give `--run-dir` a directory only "
    "you can write, and run `ppdsl run` again (each launch writes new files)"
)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- the typed spec


@dataclass(frozen=True)
class FailureSpec:
    """The testing hook PPDSL_INJECT_FAILURE (launch.parse_failure): rank `rank` fails before its `job`-th job of
    step `step`, the way `mode` says."""

    rank: int
    job: int
    step: int = 0
    mode: str = "raise"


@dataclass(frozen=True)
class ModuleSource:
    """A source file of the `--model` module (the module, and each package above it that has code), as the
    launcher imported it: the rank runs these bytes, checked against `sha256`."""

    name: str  # the dotted module name
    path: str  # its source file, absolute
    sha256: str
    package: bool  # an `__init__.py`


@dataclass(frozen=True)
class LaunchSpec:
    """`spec.json`: everything a rank of one launch reads besides its plan. Built by `ppdsl run` (run.py) and
    completed with where the launch wrote the plan (`write_launch`); read back by `read_launch_spec`."""

    request: RunRequest  # every option of the run, as `ppdsl run` was given them (`options` in the JSON form)
    model_dir: str  # where the command was typed: what the model module's own imports find, after all else
    model_sources: tuple[ModuleSource, ...] = ()  # none for a built-in model
    resume_files: Mapping[int, str] = dataclasses.field(default_factory=dict)  # rank -> its checked checkpoint
    resume_step: int = 0
    fail: FailureSpec | None = None
    # where the launch wrote the rest (filled by `write_launch`)
    launch_dir: str = ""
    plan: str = ""
    plan_sha256: str = ""
    fingerprint: str = ""

    def to_json(self) -> str:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "request"}
        data["options"] = self.request.to_spec()  # paths absolute: a rank may start elsewhere
        data["model_sources"] = [dataclasses.asdict(source) for source in self.model_sources]
        data["resume_files"] = {str(r): p for r, p in self.resume_files.items()}
        data["fail"] = None if self.fail is None else dataclasses.asdict(self.fail)
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str, where: str) -> LaunchSpec:
        """The spec `to_json` wrote; E045 for anything else, naming `where` and the field."""
        try:
            data = json.loads(text)
            return _launch_spec(data)
        except (ValueError, _Bad, RecursionError) as err:
            raise _refused(f"{where} is not a launch spec ppdsl writes: {err}") from None


# the JSON form's keys: the fields, the request written as its options
JSON_FIELDS = {f.name for f in dataclasses.fields(LaunchSpec)} - {"request"} | {"options"}


class _Bad(Exception):
    pass


def _field(data: Mapping, name: str, kinds: type | tuple[type, ...], default: Any = ...) -> Any:
    if name not in data:
        if default is ...:
            raise _Bad(f"no `{name}`")
        return default
    value = data[name]
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise _Bad(f"`{name}` is {value!r}")
    if not isinstance(value, kinds):
        raise _Bad(f"`{name}` is {type(value).__name__}")
    return value


def _count(data: Mapping, name: str, default: Any = ...) -> int:
    value = _field(data, name, int, default)
    if value < 0:
        raise _Bad(f"`{name}` is negative")
    return value


def _digest(data: Mapping, name: str, allow_empty: bool = False) -> str:
    value = _field(data, name, str)
    if not (allow_empty and not value) and (len(value) != 64 or any(c not in "0123456789abcdef" for c in value)):
        raise _Bad(f"`{name}` is not a sha256")
    return value


def _launch_spec(data: Any) -> LaunchSpec:
    if not isinstance(data, dict):
        raise _Bad("not a JSON object")
    unknown = sorted(set(data) - JSON_FIELDS)
    if unknown:
        raise _Bad(f"unknown field `{unknown[0]}`")
    sources = []
    for item in _field(data, "model_sources", list):
        if not isinstance(item, dict):
            raise _Bad("a `model_sources` entry is not an object")
        path = _field(item, "path", str)
        if not os.path.isabs(path):
            raise _Bad(f"model source `{path}` is not an absolute path")
        sources.append(
            ModuleSource(_field(item, "name", str), path, _digest(item, "sha256"), _field(item, "package", bool))
        )
    resume = {}
    for rank, path in _field(data, "resume_files", dict).items():
        number = ascii_number(rank)
        if number is None or not isinstance(path, str):
            raise _Bad(f"`resume_files` has `{rank}`")
        resume[number] = path
    fail = _field(data, "fail", (dict, type(None)))
    if fail is not None:
        mode = _field(fail, "mode", str)
        if mode not in FAILURE_MODES:
            raise _Bad(f"`fail` has mode `{mode}`")
        fail = FailureSpec(_count(fail, "rank"), _count(fail, "job"), _count(fail, "step"), mode)
    options = _field(data, "options", dict)
    try:
        request = RunRequest.from_spec(options)  # validated as `ppdsl run` validates its flags
    except TypeError as err:
        raise _Bad(f"`options` does not make a run: {err}") from None
    return LaunchSpec(
        request=request,
        model_dir=_field(data, "model_dir", str),
        model_sources=tuple(sources),
        resume_files=resume,
        resume_step=_count(data, "resume_step"),
        fail=fail,
        launch_dir=_field(data, "launch_dir", str),
        plan=_field(data, "plan", str),
        plan_sha256=_digest(data, "plan_sha256"),
        fingerprint=_field(data, "fingerprint", str),
    )


# ---------------------------------------------------------------- the launcher's side


def write_launch(launch_dir: Path, spec: LaunchSpec, plan_text: str, fingerprint: str) -> tuple[Path, str]:
    """Write `plan.json` and `spec.json` (naming the plan and its sha256) into the launch's new directory; the
    spec's path and the sha256 of its bytes, which each rank gets on its command line."""
    plan_bytes = plan_text.encode()
    plan_path = launch_dir / PLAN_NAME
    write_output(plan_path, plan_bytes)
    located = dataclasses.replace(
        spec,
        launch_dir=str(launch_dir.resolve()),
        plan=str(plan_path.resolve()),
        plan_sha256=sha256(plan_bytes),
        fingerprint=fingerprint,
    )
    spec_bytes = located.to_json().encode()
    write_output(launch_dir / SPEC_NAME, spec_bytes)
    return launch_dir / SPEC_NAME, sha256(spec_bytes)


def model_sources(model: str | None) -> tuple[ModuleSource, ...]:
    """The source files of the `--model` module the launcher has imported (`load_model`), with their sha256: the
    module and each package above it that has an `__init__.py`. None for a built-in model (ppdsl's own code)."""
    from ppdsl.runtime.builtin_models import builtin_models, split_model_name

    if model is None or model in builtin_models():
        return ()
    module_name, _ = split_model_name(model)
    parts = module_name.split(".")
    sources = []
    for k in range(1, len(parts) + 1):
        name = ".".join(parts[:k])
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path is None and hasattr(module, "__path__"):
            continue  # a namespace package: no code of its own
        if module is None or path is None or not path.endswith(".py"):
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E049",
                        f"`--model` module `{name}` is not a Python source file ({path or 'no file'}): a rank runs "
                        "the model's code from the bytes its launcher checked",
                        help="give `--model` a module written in Python (`mymodel.py`, `package/mymodel.py`)",
                    )
                ]
            )
        data = _read_once(path, MODEL_SOURCE_BYTES, "E049", "the `--model` module ")
        sources.append(ModuleSource(name, os.path.abspath(path), sha256(data), os.path.basename(path) == "__init__.py"))
    return tuple(sources)


# ---------------------------------------------------------------- the rank's side


def _refused(message: str, code: str = "E045", help: str = _REWRITTEN_HELP) -> DiagnosticError:
    return DiagnosticError([Diagnostic(code, message, help=help)])


def _read_once(path: str | Path, limit: int, code: str, what: str) -> bytes:
    """The bytes of the regular file `path`, opened without following a symlink in its place, at most `limit`."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as err:
        why = "a symbolic link, not the file the launcher wrote" if err.errno == errno.ELOOP else err.strerror
        raise _refused(f"cannot read {what}`{path}`: {why}", code) from None
    except ValueError as err:  # a NUL byte in the path
        raise _refused(f"cannot read {what}`{path}`: {err}", code) from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refused(f"cannot read {what}`{path}`: {kind(info.st_mode)}, not a regular file", code)
        try:
            if info.st_size > limit:
                raise TooLarge(info.st_size)
            return read_capped(f, limit)
        except TooLarge:
            raise _refused(f"cannot read {what}`{path}`: larger than the {limit} bytes ppdsl reads", code) from None
        except OSError as err:
            raise _refused(f"cannot read {what}`{path}`: {err.strerror or err}", code) from None


def read_bound(path: str | Path, digest: str, limit: int, what: str, code: str = "E045") -> bytes:
    """The bytes of `path`, read once, when their sha256 is `digest` (what the launcher wrote); else `code`."""
    data = _read_once(path, limit, code, what)
    found = sha256(data)
    if found != digest:
        raise _refused(
            f"{what}`{path}` is not the file its launcher wrote: its sha256 is {found[:16]}, the launcher's "
            f"{digest[:16]}",
            code,
        )
    return data


def _text(data: bytes, path: str | Path, what: str, code: str = "E045") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _refused(f"{what}`{path}` is not UTF-8 text (byte {err.start})", code) from None


def read_launch_spec(path: str | Path, digest: str | None) -> LaunchSpec:
    """The launch's spec at `path`, whose sha256 the launcher put on the rank's command line (`digest`)."""
    if digest is None or len(digest) != 64:
        raise _refused(
            f"the rank was started without the sha256 of its launch spec `{path}`",
            help="ranks are started by `ppdsl run --nproc-per-node`, which passes it: `worker.py SPEC SHA256`",
        )
    data = read_bound(path, digest, SPEC_BYTES, "the launch spec ")
    return LaunchSpec.from_json(_text(data, path, "the launch spec "), f"`{path}`")


def load_plan(launch: LaunchSpec):
    """The plan specification the spec names, read once and checked against the spec's sha256 before it is
    parsed (E045), then against the schedule the launcher checked (`fingerprint`, E090); E091 for a file that is
    not a plan."""
    from ppdsl.plan.spec import PlanSpec

    path = launch.plan
    data = read_bound(path, launch.plan_sha256, PLAN_BYTES, "the plan ")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DiagnosticError(
            [Diagnostic("E091", f"cannot read the plan `{path}`: not UTF-8 text (byte {err.start})")]
        ) from None
    spec = PlanSpec.from_json(text, f"`{path}`")
    spec.require_fingerprint(
        launch.fingerprint,
        "the schedule `ppdsl run` checked for this launch",
        f"`{path}` was replaced after the launch wrote it; run `ppdsl run` again, which writes a new launch's plan",
    )
    return spec


def load_bound_model(launch: LaunchSpec):
    """The `--model` of the launch, its module run from the source bytes the launcher checked (E049 if a file
    changed since): the module and the packages above it, each from its own checked bytes, in order. A module the
    rank has imported already (ppdsl's own, the standard library's) is that one."""
    from ppdsl.runtime.builtin_models import load_model, model_dir_last, model_from_module, split_model_name

    model = launch.request.model
    if not launch.model_sources:
        return load_model(model, launch.model_dir)
    module_name, _ = split_model_name(model)
    if launch.model_sources[-1].name != module_name:
        raise _refused(f"the launch spec binds no source file of the `--model` module `{module_name}`", "E049")
    with model_dir_last(launch.model_dir):
        for source in launch.model_sources:
            if source.name not in sys.modules:
                _run_source(source)
    return model_from_module(model, sys.modules[module_name])


def _run_source(source: ModuleSource):
    """A module made from the checked bytes of its source file, registered in sys.modules under its name."""
    data = read_bound(source.path, source.sha256, MODEL_SOURCE_BYTES, "the `--model` module ", "E049")
    text = _text(data, source.path, "the `--model` module ", "E049")
    spec = importlib.util.spec_from_loader(source.name, loader=None, origin=source.path, is_package=source.package)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = source.path
    if source.package:
        module.__path__ = [os.path.dirname(source.path)]
    parent, _, child = source.name.rpartition(".")
    sys.modules[source.name] = module
    try:
        exec(compile(text, source.path, "exec", dont_inherit=True), module.__dict__)
    except BaseException as err:
        sys.modules.pop(source.name, None)
        raise DiagnosticError(
            [
                Diagnostic(
                    "E031",
                    f"cannot import model module `{source.name}`: {type(err).__name__}: {err}",
                    help=f"run the module alone (`python -c 'import {source.name}'`) to see the whole traceback",
                )
            ]
        ) from None
    if parent and parent in sys.modules:
        setattr(sys.modules[parent], child, module)
    return module
