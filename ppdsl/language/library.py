"""The shipped schedule library: where it lives and how a name on the command line finds a file."""

from __future__ import annotations

import difflib
import re
from pathlib import Path


def library_dir() -> Path:
    """`ppdsl/schedules` in an installed wheel, the repository's `schedules/` in a checkout."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "schedules"
    if packaged.is_dir():
        return packaged
    return package.parent / "schedules"


def library_files() -> list[Path]:
    return sorted(library_dir().glob("*.sched"))


def find_schedule(name_or_path: str) -> Path:
    """A path as given if it exists, else a library schedule by name (`1f1b` or `1f1b.sched`)."""
    path = Path(name_or_path)
    if path.exists():
        return path
    stem = path.name[:-6] if path.name.endswith(".sched") else path.name
    candidate = library_dir() / f"{stem.lower()}.sched"
    if path.parent == Path(".") and candidate.exists():
        try:  # short paths read better in diagnostics
            return candidate.relative_to(Path.cwd())
        except ValueError:
            return candidate
    return path


def _key(name: str) -> str:
    """A name as a user might type it: lower case, letters and digits only (`ZB-V` and `zbv` are one)."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def schedule_names() -> dict[str, str]:
    """Every name a shipped schedule is known by -> its stem: the stem itself, and the names in its docstring's
    title (`FThenB (GPipe)`, `Interleaved 1F1B (Megatron-LM / ...)`), read from the files (one source)."""
    names: dict[str, str] = {}
    for path in library_files():
        stem = path.stem
        names[_key(stem)] = stem
        first = path.read_text(encoding="utf-8").lstrip().removeprefix('"""').split("\n", 1)[0]
        title = first.split(":", 1)[0]
        for part in re.split(r"[()/,`]", title):
            key = _key(part.replace("PyTorch", "").replace("Schedule", ""))
            if len(key) >= 3:
                names.setdefault(key, stem)
    return names


def suggest_schedules(name: str) -> list[str]:
    """The shipped schedules a mistyped name probably means (`gpipe` -> `fthenb`, `zbh` -> `zbh1`, `zbh2`)."""
    stem = Path(name).name.removesuffix(".sched")
    key = _key(stem)
    if not key:
        return []
    names = schedule_names()
    if key in names:
        return [names[key]]
    close = difflib.get_close_matches(key, list(names), n=6, cutoff=0.7)
    prefixed = [k for k in names if k.startswith(key)]
    return list(dict.fromkeys(names[k] for k in [*close, *prefixed]))[:3]


def missing_schedule_help(name: str) -> str:
    """The help of a schedule argument that is neither a file nor a shipped name: what it may have meant and every
    shipped name, so the user need not look them up."""
    shipped = ", ".join(path.stem for path in library_files())
    suggestions = suggest_schedules(name)
    meant = f"did you mean {' or '.join(f'`{s}`' for s in suggestions)}? " if suggestions else ""
    return f"{meant}a schedule is a path or a shipped name: {shipped} (`ppdsl list`)"
