"""The shipped schedule library: where it lives and how a name on the command line finds a file."""

from __future__ import annotations

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
