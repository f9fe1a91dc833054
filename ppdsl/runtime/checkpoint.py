"""Checkpoints: how a run's state is written into `--save-dir`, found and read back for `--resume`, and refused when
it cannot be trusted.

A save directory holds only names ppdsl creates (and it deletes only files of these names):

  checkpoint.npz                  one process: the whole state, replaced atomically at every save
  checkpoint.step<N>.rank<r>.npz  a multi-process run: rank r's state after N steps, written atomically; each rank
                                  keeps its two newest, so the newest step every rank completed survives a kill at
                                  any moment (no rank finishes a step before every other rank has saved the one
                                  before: the pipeline's forwards and backwards pass through all of them)
  .ppdsl.lock                     locked (`flock`) by the run saving here, so a second run into the directory is
                                  refused; the lock dies with its process, a killed run leaves none behind

Each file is an uncompressed `.npz`: the state arrays and `__meta__`, a JSON object with the next step and the run's
identity (`run_identity`), which a resumed run must match. Reading trusts nothing in the file: only a regular file is
opened (a FIFO would hang, a device never ends), every array's header is checked against the bytes that follow it
before anything is allocated, pickled objects are refused, and each zip member's CRC is verified. Every problem is a
diagnostic naming the file: E061 damaged, E060 not finite, E037 of another run, E062 ranks at different steps.

A checkpoint restores the model's and the optimizer's state (parameters, moments, the step), never a flag: the
learning rate variable Paddle's optimizer keeps in the scope holds `--lr` and comes from the command line of the
run that resumes (`FLAG_STATE`: not saved, and ignored in a file that holds it).

No paddle here: the command line checks a checkpoint before paddle loads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.files import open_atomic, trusted_directory
from ppdsl.common.text import count, numbered
from ppdsl.plan.spec import PlanSpec
from ppdsl.runtime.request import TrainConfig

CHECKPOINT = "checkpoint.npz"
RANK_CHECKPOINT = re.compile(r"checkpoint\.step(\d+)\.rank(\d+)\.npz")
LOCK = ".ppdsl.lock"
META = "__meta__"
MAX_META_CHARS = 1 << 16  # the metadata ppdsl writes is a few hundred characters
NPY_MAGIC = b"\x93NUMPY"


def rank_checkpoint_name(step: int, rank: int) -> str:
    return f"checkpoint.step{step}.rank{rank}.npz"


# ---------------------------------------------------------------- what a checkpoint holds

# State the startup program initialises from a flag rather than from training: Paddle's optimizer keeps `--lr` in
# a persistable `learning_rate_<n>`. Restored, a file's value would override the flag (with 0 there nothing trains,
# while the run reports its --lr); the identity check compares metadata only, not this array.
LEARNING_RATE = "learning_rate"  # the canonical name of the variable Paddle's optimizer keeps `--lr` in
FLAG_STATE = frozenset({LEARNING_RATE})


def checkpointed(canonical: str, parameters) -> bool:
    """Whether the state of this canonical name goes into a checkpoint: everything but FLAG_STATE (a parameter of
    the model of that name is the model's)."""
    return canonical not in FLAG_STATE or canonical in parameters


# ---------------------------------------------------------------- what a checkpoint must match


def canonical_name(name: str, parameters) -> str:
    """Optimizer state is named `<param>_moment1_<n>` with `n` from a process-wide counter, so the same model
    built twice in one process names it differently; the name without the counter is stable."""
    return name if name in parameters else re.sub(r"_\d+$", "", name)


def state_variables(startup, parameters) -> dict[str, str]:
    """Canonical name -> variable of the state a checkpoint holds: what the startup program initialises, but a
    flag's value (checkpoint.FLAG_STATE: the learning rate is the command line's, never a file's)."""
    named = {canonical_name(n, parameters): n for n in startup_state_names(startup)}
    return {key: n for key, n in named.items() if checkpointed(key, parameters)}


def learning_rate_in(scope, state_names, parameters, flag: float) -> float:
    """The learning rate the optimizer runs with: its variable in `scope` (what a restore could have set), not the
    flag. Written as `flag` when the two agree at the variable's precision (0.01 is not exact in float32)."""
    values = {
        float(np.array(scope.find_var(n).get_tensor()).reshape(-1)[0])
        for n in state_names
        if n not in parameters and canonical_name(n, parameters) == LEARNING_RATE
    }
    if len(values) != 1:  # no optimizer variable of its own (or several): the flag is what it was given
        return flag
    (value,) = values
    return flag if np.float32(value) == np.float32(flag) else value


def startup_state_names(startup) -> list[str]:
    """What the startup program initialises: the state a checkpoint must hold."""
    names = []
    for op in startup.global_block().ops:
        if op.name() == "builtin.set_parameter":
            names.append(op.attrs()["parameter_name"])
        elif op.name() == "builtin.shadow_output":
            names.append(op.attrs()["output_name"])
    return sorted(set(names))


def check_finite(step: int, losses, parameters: dict[str, np.ndarray], steps: int, where: str = "") -> None:
    """Stop a run whose loss or parameters went NaN or infinite at `step` (1-based, as the progress counts): E060.

    The loss alone does not show it: Paddle's CPU softmax maps an all-NaN row to the uniform distribution, so NaN
    logits give the finite cross entropy ln(vocabulary) (4.1589 for 64 tokens) every step."""
    bad_losses = [mb for mb, value in enumerate(losses) if not np.isfinite(value)]
    bad_params = non_finite(parameters)
    if not bad_losses and not bad_params:
        return
    found = []
    if bad_params:
        more = f" ({count(len(bad_params) - 1, 'more parameter')} too)" if len(bad_params) > 1 else ""
        found.append(f"parameter `{bad_params[0]}` holds NaN or infinite values{more}")
    if bad_losses:
        found.append(f"the loss of {numbered('micro-batch', bad_losses)} is not finite")
    raise DiagnosticError(
        [
            Diagnostic(
                "E060",
                f"training diverged{where} at step {step} of {steps}: "
                + "; ".join(found)
                + "; nothing of it was saved",
                help="lower --lr, or resume from an earlier checkpoint with a lower one",
            )
        ]
    )


def run_identity(spec: PlanSpec, model_name: str, config: TrainConfig, dp: int = 1) -> dict:
    """What a checkpoint must match to be resumed: the schedule (its name, and the fingerprint of its text and
    includes: an edited schedule may order the jobs, and so the floating-point sums, differently), its sizes and
    parameters, the model, and what else decides the next step's numbers: the training options (`TrainConfig`:
    batch, learning rate, optimizer, data seed), and the data-parallel replicas (`dp`: which micro-batches each
    trains and the order their gradients are summed in; named only above 1, so a one-replica checkpoint reads as it
    always did)."""
    replicas = {"dp": dp} if dp > 1 else {}
    return {
        **replicas,
        "schedule": spec.schedule,
        "schedule_fingerprint": spec.fingerprint,
        "pp": spec.pp,
        "vpp": spec.vpp,
        "microbatches": spec.microbatches,
        "params": spec.parameters,
        "model": model_name,
        **dataclasses.asdict(config),
    }


# ---------------------------------------------------------------- reading


@dataclass
class Checkpoint:
    path: Path
    step: int  # the steps done: the next step to run
    arrays: dict[str, np.ndarray]


def _error(code: str, message: str, help: str = "") -> DiagnosticError:
    return DiagnosticError([Diagnostic(code, message, help=help)])


def _damaged(path: Path, what: str, help: str = "") -> DiagnosticError:
    return _error(
        "E061",
        f"checkpoint `{path}` {what}",
        help=help or "resume from a checkpoint ppdsl wrote (`--save-dir`), or start afresh without --resume",
    )


def _shown(text: str, limit: int = 60) -> str:
    """A name read from the file, with control characters escaped and its length bounded."""
    escaped = text.encode("unicode_escape").decode("ascii")
    return escaped if len(escaped) <= limit else escaped[:limit] + "..."


_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _not_regular(path: Path, mode: int) -> DiagnosticError | None:
    if stat.S_ISREG(mode):
        return None
    kind = _KINDS.get(stat.S_IFMT(mode), "a special file")
    return _damaged(path, f"is {kind}, not a file (only regular files are read)")


def _open_regular(path: Path):
    """The file, opened for reading if it is a regular file (looked at before opening, and again once open, so a
    FIFO swapped in between cannot make the read hang)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise _error("E037", f"cannot resume: `{path}` does not exist", help="point --resume at a --save-dir") from None
    except OSError as err:
        what = "is a symlink loop" if err.errno == errno.ELOOP else f"cannot be read: {err.strerror or err}"
        raise _damaged(path, what) from None
    if problem := _not_regular(path, mode):
        raise problem
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise _damaged(path, f"cannot be read: {err.strerror or err}") from None
    info = os.fstat(fd)
    if problem := _not_regular(path, info.st_mode):
        os.close(fd)
        raise problem
    return os.fdopen(fd, "rb"), info.st_size


class _BadMember(ValueError):
    """A member that is not a numeric `.npy` array whose header matches its bytes; says what, in words."""


def _read_member(member, size: int, kinds: str) -> np.ndarray:
    """One `.npy` member: header checked against the bytes that follow before any allocation; no pickles, only
    dtypes of these `kinds`."""
    try:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
        else:
            raise ValueError(version)
    except Exception:  # numpy parses the header text with Python's tokenizer and literal_eval, which raise several
        # kinds of error on damaged text (the CRC is checked only at the member's end); any of them means the same:
        # this is no array header
        raise _BadMember("its array header is not valid") from None
    if dtype.hasobject or dtype.kind not in kinds:
        raise _BadMember(f"its dtype `{dtype}` is not {'text' if kinds == 'U' else 'numeric'}")
    count = 1
    for dim in shape:
        count *= dim
    nbytes = count * dtype.itemsize
    left = size - member.tell()
    if nbytes != left or any(dim < 0 for dim in shape):
        raise _BadMember(f"its header declares shape {shape} ({nbytes} bytes) but {left} bytes follow")
    data = np.empty(count, dtype)
    if nbytes and member.readinto(memoryview(data).cast("B")) != nbytes:
        raise _BadMember("it ends early")
    if member.read(1):  # also reaches the member's end, where zipfile checks its CRC
        raise _BadMember("it has bytes after its data")
    return data.reshape(shape, order="F" if fortran else "C")


def _member_label(key: str) -> str:
    return "the metadata" if key == META else f"array `{_shown(key)}`"


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    f, size = _open_regular(path)
    with f:
        if size == 0:
            raise _damaged(path, "is empty", help="it was never written whole; resume from an earlier checkpoint")
        head = f.read(len(NPY_MAGIC))
        f.seek(0)
        if head == NPY_MAGIC:
            raise _damaged(path, "is a single array (`.npy`), not a checkpoint (`.npz` of the whole state)")
        arrays: dict[str, np.ndarray] = {}
        try:
            with zipfile.ZipFile(f) as archive:
                infos = archive.infolist()
                declared = sum(i.file_size for i in infos)
                if declared > 4 * size + (1 << 20):
                    raise _damaged(path, f"declares {declared} bytes of arrays in a file of {size} bytes")
                for info in infos:
                    key = info.filename.removesuffix(".npy")
                    if key == info.filename or key in arrays:
                        what = "twice" if key in arrays else "(not an array)"
                        raise _damaged(path, f"holds `{_shown(info.filename)}` {what}")
                    label = _member_label(key)
                    try:
                        with archive.open(info) as member:
                            arrays[key] = _read_member(member, info.file_size, "U" if key == META else "biufc")
                    except _BadMember as err:
                        bad = "bad metadata" if key == META else f"a bad {label}"
                        raise _damaged(path, f"has {bad}: {err}") from None
                    except zipfile.BadZipFile as err:
                        what = "fails its CRC check" if "CRC" in str(err) else "does not match the zip directory"
                        raise _damaged(path, f"is damaged: {label} {what}") from None
        except zipfile.BadZipFile as err:
            what = "not a zip archive" if "not a zip file" in str(err) else "a zip archive whose directory is broken"
            raise _damaged(path, f"is damaged or truncated: {what}") from None
        except (OSError, EOFError, zlib.error, NotImplementedError, RuntimeError, ValueError, OverflowError):
            # what a corrupt zip raises from inside zipfile: a bad offset, a short read, a bad compressed stream, an
            # unknown compression or encryption; said in words, for none of it is the user's program
            raise _damaged(path, "is damaged or truncated: its zip structure cannot be read") from None
    return arrays


def _metadata(path: Path, value: np.ndarray | None) -> dict:
    if value is None:
        raise _damaged(
            path,
            "has no metadata (the step it is at and the run it belongs to)",
            help="ppdsl cannot tell which step it is at or which run wrote it; start afresh without --resume",
        )
    if value.shape != ():
        raise _damaged(path, f"has metadata that is not one text (an array of shape {value.shape})")
    if value.dtype.itemsize > 4 * MAX_META_CHARS:
        raise _damaged(path, f"has metadata of {value.dtype.itemsize // 4} characters (ppdsl writes a few hundred)")
    try:
        meta = json.loads(str(value[()]))
    except ValueError as err:
        raise _damaged(path, f"has metadata that is not JSON (at character {getattr(err, 'pos', 0)})") from None
    except RecursionError:
        raise _damaged(path, "has metadata that is not JSON ppdsl writes (nested too deeply)") from None
    if not isinstance(meta, dict):
        raise _damaged(path, "has metadata that is not a JSON object")
    return meta


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def non_finite(arrays: Mapping[str, np.ndarray]) -> list[str]:
    """The names of the arrays holding a NaN or an infinity, in order. The float64 sum of a float32 array is finite
    exactly when every element is (no sum of float32 values overflows float64): one pass, no temporary array."""
    bad = []
    with np.errstate(all="ignore"):  # inf - inf in the sum is the answer sought, not a warning to print
        for name, value in arrays.items():
            if value.dtype.kind == "f" and value.dtype.itemsize <= 4:
                finite = bool(np.isfinite(np.sum(value, dtype=np.float64)))
            else:  # a sum of float64 values could overflow; integers are always finite
                finite = value.dtype.kind not in "fc" or bool(np.isfinite(value).all())
            if not finite:
                bad.append(name)
    return bad


def read_checkpoint(path: str | Path, identity: Mapping | None = None, *, step: int | None = None) -> Checkpoint:
    """The checkpoint at `path`, if it is whole, finite and (with `identity`) of this run; `step`: the step its file
    name says. Raises DiagnosticError naming the file and what is wrong."""
    path = Path(path)
    arrays = _read_arrays(path)
    meta = _metadata(path, arrays.pop(META, None))
    saved = meta.get("step")
    if not _is_count(saved):
        raise _damaged(
            path, f"has a bad step `{_shown(json.dumps(saved), 40)}` in its metadata (a whole number from 0)"
        )
    if step is not None and saved != step:
        raise _damaged(path, f"says it is at step {saved}, but its name says step {step}")
    recorded = meta.get(ARRAYS)
    if recorded is not None and recorded != _names_digest(arrays):
        # every member has its CRC, but a flip in the archive's directory can hide whole members
        listed = meta.get(ARRAY_COUNT)
        raise _damaged(path, f"holds {len(arrays)} arrays, not the {_value(listed)} its metadata lists")
    if bad := non_finite(arrays):
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise _error(
            "E060",
            f"checkpoint `{path}` holds NaN or infinite values in `{_shown(bad[0])}`{more}",
            help="the run it is from diverged; resume from an earlier checkpoint, or start afresh with a lower --lr",
        )
    if identity is not None:
        _check_identity(path, meta, identity)
    return Checkpoint(path, saved, arrays)


def _value(value) -> str:
    return _shown(value if isinstance(value, str) else json.dumps(value), 40)


FINGERPRINT = "schedule_fingerprint"
ARRAYS = "arrays_sha256"  # of the state's array names, sorted: a checkpoint missing one reads as damaged
ARRAY_COUNT = "arrays"


def _names_digest(arrays: Mapping[str, object]) -> str:
    return hashlib.sha256("\n".join(sorted(arrays)).encode("utf-8", "surrogatepass")).hexdigest()


def _check_identity(path: Path, meta: dict, identity: Mapping) -> None:
    # the replicas are named only above 1 (`run_identity`): a file without `dp` is of one replica
    meta, identity = {"dp": 1, **meta}, {"dp": 1, **identity}
    missing = [key for key in identity if key not in meta]
    changed = [key for key, value in identity.items() if key in meta and meta[key] != value]
    saved_print = meta.get(FINGERPRINT)
    if FINGERPRINT in changed and not (isinstance(saved_print, str) and len(saved_print) == len(identity[FINGERPRINT])):
        raise _error(  # ppdsl before the plan specification hashed the schedule another way: nothing to compare
            "E037",
            f"checkpoint `{path}` records its schedule's text by an older ppdsl's fingerprint",
            help="ppdsl cannot tell whether it belongs to this run; start afresh without --resume",
        )
    if changed == [FINGERPRINT]:  # the same run but for the schedule's text: say so, with both fingerprints
        raise _error(
            "E090",
            f"checkpoint `{path}` was saved under a schedule whose text hashes to "
            f"{_value(str(meta[FINGERPRINT]))[:16]}, but `{identity['schedule']}` now hashes to "
            f"{identity[FINGERPRINT][:16]} (the .sched file or one it includes changed since)",
            help="resume with the schedule text it was saved with (restore the file), or start afresh without --resume",
        )
    differ = [
        f"{key} `{_value(meta[key])}` (this run: `{_value(identity[key])}`)"
        if key != FINGERPRINT
        else "the schedule's text (the .sched file or one it includes changed since)"
        for key in changed
    ]
    if differ:
        raise _error(
            "E037",
            f"checkpoint `{path}` is from another run: " + ", ".join(differ),
            help="resume with the schedule, sizes, --dp, model, batch size, --lr, --optimizer and --seed it was saved "
            "with, or start afresh without --resume",
        )
    if missing:
        raise _error(
            "E037",
            f"checkpoint `{path}` does not record its " + ", ".join(missing) + " (it was saved by an older ppdsl)",
            help="ppdsl cannot tell whether it belongs to this run; start afresh without --resume",
        )


# ---------------------------------------------------------------- finding the checkpoint to resume


def _rank_files(directory: Path) -> dict[int, dict[int, Path]]:
    """rank -> step -> file, for every `checkpoint.step<N>.rank<r>.npz` in the directory."""
    found: dict[int, dict[int, Path]] = {}
    for entry in os.scandir(directory):
        match = RANK_CHECKPOINT.fullmatch(entry.name)
        if match:
            found.setdefault(int(match[2]), {})[int(match[1])] = Path(entry.path)
    return found


def resume_files(directory: str | Path, ranks: Sequence[int] | None) -> dict[int, tuple[Path, int | None]]:
    """The file each of `ranks` resumes from, and the step its name says: the newest step every one of them saved,
    else a single-process `checkpoint.npz` for all. `ranks` None: a single process, which resumes only from a
    `checkpoint.npz` (a rank's file holds its own stages' trained parameters only)."""
    directory = Path(directory)
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise _error("E037", f"cannot resume from `{directory}`: it {what}", help="point --resume at a --save-dir")
    try:
        by_rank = _rank_files(directory)
    except OSError as err:
        raise _error("E037", f"cannot resume from `{directory}`: {err.strerror or err}") from None
    single = directory / CHECKPOINT
    if ranks is None:
        if not os.path.lexists(single) and by_rank:
            raise _error(
                "E037",
                f"`{directory}` holds the per-rank checkpoints of a multi-process run, not a single-process "
                f"`{CHECKPOINT}`",
                help="resume it with --nproc-per-node, as it was saved",
            )
        return {0: (_existing(single, directory), None)}
    if not by_rank:
        path = _existing(single, directory)
        return {r: (path, None) for r in ranks}
    common = set.intersection(*(set(by_rank.get(r, {})) for r in ranks))
    if not common:
        held = "; ".join(
            f"rank {r}: " + (", ".join(f"step {s}" for s in sorted(by_rank[r])) if by_rank.get(r) else "none")
            for r in ranks
        )
        raise _error(
            "E062",
            f"`{directory}` has no step that every rank saved ({held})",
            help="the run was stopped while its ranks were saving; these checkpoints cannot continue it in step: "
            "start afresh without --resume",
        )
    step = max(common)
    return {r: (by_rank[r][step], step) for r in ranks}


def _existing(path: Path, directory: Path) -> Path:
    if not os.path.lexists(path):
        raise _error(
            "E037",
            f"cannot resume from `{directory}`: it holds no checkpoint",
            help=f"point --resume at a --save-dir: it holds `{CHECKPOINT}` or `checkpoint.step<N>.rank<r>.npz`",
        )
    return path


def read_resume(
    directory: str | Path, identity: Mapping, ranks: Sequence[int] | None = None, steps: int | None = None
) -> dict[int, Checkpoint]:
    """Every rank's checkpoint to resume from (`ranks` None: one process, key 0), read and checked: whole, finite,
    of this run, at the step its name says (so all at one step), and (with `steps`, the run's total) not past its
    end."""
    files = resume_files(directory, ranks)
    read: dict[Path, Checkpoint] = {}  # a single-process checkpoint.npz serves every rank: read it once
    for path, step in files.values():
        if path not in read:
            read[path] = read_checkpoint(path, identity, step=step)
    found = {r: read[path] for r, (path, _) in files.items()}
    first = next(iter(found.values()))
    if steps is not None and first.step > steps:
        raise _error(
            "E037",
            f"checkpoint `{first.path}` is at step {first.step}, past the end of this run (--steps {steps})",
            help=f"--steps counts every step of the run, the resumed ones too: give --steps {first.step} or more",
        )
    return found


# ---------------------------------------------------------------- writing


def write_checkpoint(path: Path, step: int, identity: Mapping, state: Mapping[str, np.ndarray], **meta) -> None:
    """Write the state, the step and the run's identity atomically; never a state with NaN or infinity in it."""
    if bad := non_finite(state):
        raise _error(
            "E060",
            f"not saving `{path}`: the state after step {step} holds NaN or infinite values in `{bad[0]}`",
            help="training diverged; lower --lr",
        )
    try:
        with open_atomic(path) as f:
            held = {ARRAYS: _names_digest(state), ARRAY_COUNT: len(state)}  # what a reader checks its members against
            np.savez(f, **{META: np.array(json.dumps({"step": step, **identity, **held, **meta}))}, **state)
    except OSError as err:
        raise _error(
            "E000", f"cannot write checkpoint `{path}`: {err.strerror or err}", help="check the --save-dir"
        ) from None


def prune_rank_checkpoints(directory: Path, rank: int, keep: set[int]) -> None:
    """Delete this rank's checkpoint files of steps other than `keep` (regular files of ppdsl's names only)."""
    for r, files in _rank_files(directory).items():
        if r != rank:
            continue
        for step, path in files.items():
            if step not in keep and stat.S_ISREG(os.lstat(path).st_mode):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


@contextlib.contextmanager
def lock_save_dir(directory: str | Path) -> Iterator[Path]:
    """Create the save directory and hold its lock for the block: refuses (E063) while another run holds it, and
    (E000) a directory that cannot be created or written, before any training."""
    directory = Path(directory)
    # made if missing; refused (E054) if another user could change it or a directory above it, for the ranks and
    # a resumed run reopen its files by name (`files.trusted_directory`)
    with trusted_directory(directory, "--save-dir") as checked:
        lock = directory / LOCK
        try:
            # never follow a planted symlink, never truncate or write: the file is only a handle for the lock
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
            fd = os.open(LOCK, flags, 0o666, dir_fd=checked.fd)
        except OSError as err:
            what = "is a symlink" if err.errno == errno.ELOOP else err.strerror or str(err)
            raise _error(
                "E000",
                f"cannot write into --save-dir `{directory}`: `{lock}` {what}",
                help="choose a writable directory",
            ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _error("E000", f"cannot lock --save-dir `{directory}`: `{lock}` is not a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _error(
                "E063",
                f"another run is saving checkpoints into `{directory}` (it holds `{lock}`)",
                help="wait for it to end, or give this run another --save-dir",
            ) from None
        except OSError as err:
            raise _error("E000", f"cannot lock --save-dir `{directory}`: {err.strerror or err}") from None
        yield directory
    finally:
        os.close(fd)  # releases the lock


# ---------------------------------------------------------------- restoring into a scope


def restore_state(scope, place, variables: dict[str, str], arrays: Mapping[str, np.ndarray], path) -> None:
    """Set checkpoint arrays (canonical name -> array) into the scope's variables (canonical name -> variable);
    refuse a checkpoint that lacks this model's state, has state it lacks, or has it in other shapes or dtypes.
    `variables` holds what a checkpoint holds (`checkpointed`); a flag's value a file holds (older checkpoints kept
    the learning rate) is not restored."""
    arrays = {k: v for k, v in arrays.items() if k in variables or k not in FLAG_STATE}
    problems = [f"it has `{_shown(n)}`, which this model lacks" for n in sorted(set(arrays) - set(variables))]
    problems += [f"it lacks `{n}`" for n in sorted(set(variables) - set(arrays))]
    for name in sorted(set(arrays) & set(variables)):
        have = np.array(scope.find_var(variables[name]).get_tensor())
        if tuple(arrays[name].shape) != have.shape:
            problems.append(f"`{name}` has shape {tuple(arrays[name].shape)}, this model {have.shape}")
        elif arrays[name].dtype != have.dtype:
            problems.append(f"`{name}` is {arrays[name].dtype}, this model's {have.dtype}")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise _error(
            "E037",
            f"checkpoint `{path}` does not fit this model: {problems[0]}{more}",
            help="resume with the model it was saved with",
        )
    for name, value in arrays.items():
        scope.find_var(variables[name]).get_tensor().set(value, place)
