"""PyTorch pipelining's compute-only CSV -> a `.sched` literal table (`ppdsl import`).

The CSV has one row per rank and one cell per step: `<global stage><F|B|I|W><micro-batch>`, empty cells for idle
steps, and DualPipeV's `(0F3;3B1)OVERLAP_F_B` for an overlapped forward + backward (imported as the two jobs in
that order). Which stages a rank holds gives the placement: looped (stage = chunk * pp + rank), V-shaped, or
an explicit table of stages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, Span
from ppdsl.common.files import CSV_BYTES, read_text
from ppdsl.common.text import shortened
from ppdsl.language.sched_text import sched_docstring_text, sched_string
from ppdsl.plan.jobs import Job

_OVERLAP = re.compile(r"^\((\d+[FBIW]\d+);(\d+[FBIW]\d+)\)OVERLAP_F_B$")
_TORCH_ONLY = re.compile(r"^\d+(UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)\d*$")
MAX_ERRORS = 20
# digits of a stage or micro-batch number: Python refuses to read integers past 4300 digits, and no pipeline has a
# billion stages or micro-batches
MAX_DIGITS = 9
# a compute action's shape, to refuse an over-long number before `Job.parse` reads it (Python's int() of a
# 5000-digit string raises)
_ACTION = re.compile(r"^(\d+)(F|B|I|W)(\d+)$")


# A pipeline's size: more ranks (rows) or a larger stage number than this is not a schedule anyone runs, and the
# bounds keep what the import holds (one entry per stage and per rank) small whatever the file says
MAX_RANKS = 4096
MAX_STAGES = 65536
# torch never quotes its cells; an empty cell is an idle step. The cells of a row are read one at a time: a row can
# hold millions of them, and a list of them costs tens of times the row's size (issue 26: a 64 MiB file needed 7.5 GB)
_CELL = re.compile(r"[^,]+")
_LINE_END = re.compile(r"\r\n|\r|\n")
_PLAIN = re.compile(r"\s*([0-9]{1,9})([FBIW])([0-9]{1,9})\s*")  # `0F3`: the cell nearly every cell is


def _compute_action(token: str) -> Job | None:
    """The compute job a torch action names (`0F3`, `2I1`), None for anything else."""
    try:
        job = Job.parse(token)
    except ValueError:
        return None
    return job if job.letter is not None else None


def _rows(text: str, file: str) -> list[str]:
    """The CSV's rows (one per rank); more than MAX_RANKS is refused before the text is split."""
    text = text.removeprefix("\ufeff")  # a byte-order mark (spreadsheets write one) is not part of the first cell
    if text.count("\n") + text.count("\r") > 2 * MAX_RANKS + 1:  # \r\n counts twice: checked exactly below
        rows = MAX_RANKS + 1
    else:
        lines = _LINE_END.split(text)  # one copy of the text, not one per kind of line end
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) <= MAX_RANKS:
            return lines
        rows = len(lines)
    raise DiagnosticError(
        [
            Diagnostic(
                "E020",
                f"the CSV has {'more than ' if rows == MAX_RANKS + 1 else ''}{rows} rows, one per rank: more than "
                f"the {MAX_RANKS} ranks ppdsl imports",
                Span(file, 1, 1, 1, 2),
                help="is it the right file? a PyTorch compute-only CSV has one row per pipeline rank",
            )
        ]
    )


def _actions(line: str, row_no: int, file: str, errors: list[Diagnostic]) -> Iterator[tuple[int, str, int, int]]:
    """(stage, letter, micro-batch, column) of each compute action of one row, one at a time; a cell that is not one
    adds a diagnostic to `errors` (up to MAX_ERRORS of them) naming its row and column."""
    for cell_match in _CELL.finditer(line):
        plain = _PLAIN.fullmatch(cell_match.group())
        if plain is not None and int(plain.group(1)) < MAX_STAGES:  # the common cell, read at once
            yield int(plain.group(1)), plain.group(2), int(plain.group(3)), cell_match.start() + plain.start(1) + 1
            continue
        raw = cell_match.group()
        cell = raw.strip()
        if not cell:
            continue
        col = cell_match.start() + 1 + len(raw) - len(raw.lstrip())
        overlap = _OVERLAP.match(cell)
        parts = [overlap.group(1), overlap.group(2)] if overlap else [cell]
        for part in parts:
            m = _ACTION.match(part)
            problem = ""
            if m and max(len(m.group(1)), len(m.group(3))) > MAX_DIGITS:
                problem, label = "has a number too large for a stage or a micro-batch", "too large"
                help_text = f"stages and micro-batches have at most {MAX_DIGITS} digits"
            elif m and int(m.group(1)) >= MAX_STAGES:
                problem, label = f"names stage {int(m.group(1))}", "too large"
                help_text = f"ppdsl imports pipelines of at most {MAX_STAGES} stages (0 .. {MAX_STAGES - 1})"
            else:
                job = _compute_action(part)
                if job is not None:
                    yield job.stage, job.letter, job.mb, col
                    continue
                problem, label = "is not a compute action", "not a compute action"
                if _TORCH_ONLY.match(part):
                    help_text = 'export the compute-only schedule (`_dump_csv(..., format="compute_only")`)'
                else:
                    help_text = "a cell is `<stage><F|B|I|W><micro-batch>`, e.g. `0F3` or `2I1`"
            if len(errors) < MAX_ERRORS:
                errors.append(
                    Diagnostic(
                        "E020",
                        f"row {row_no}, column {col}: `{shortened(cell)}` {problem}",
                        Span(file, row_no, col, row_no, col + len(cell)),
                        label=label,
                        help=help_text,
                    )
                )


def import_torch_csv(path: str | Path, name: str | None = None, placement: str | None = None) -> str:
    path = Path(path)
    text = read_text(path, CSV_BYTES)
    return torch_csv_to_sched(text, str(path), name or path.stem, placement)


def torch_csv_to_sched(text: str, file: str, name: str, placement: str | None = None) -> str:
    """The `.sched` literal table of a PyTorch compute-only CSV; raises DiagnosticError naming row and column.

    Two passes over the text, neither holding an object per action: the first checks every cell and learns which
    rank holds which stage, the second writes the table. What it holds besides the text and the result is a few
    entries per stage and per rank (issue 26)."""
    rows = _rows(text, file)
    pp = len(rows)
    owner, nmb = _stage_owners(rows, file)
    placement, stage_rows = _placement(owner, pp, file, placement)
    vpp = len(owner) // pp
    chunk_of = {s: c for stage_list in stage_rows.values() for c, s in enumerate(stage_list)}
    out = _sched_header(name, file, pp, vpp, nmb, placement, stage_rows)
    # written a cell at a time into bytes: a list of the cells' strings costs tens of bytes a cell, a StringIO four
    # bytes a character and more; the cells are ASCII
    table = bytearray("\n".join(out).encode())
    errors: list[Diagnostic] = []
    for r, line in enumerate(rows):
        table += f"    rank {r}: ".encode()
        for stage, letter, mb, _ in _actions(line, r + 1, file, errors):
            table += (f"{letter}{mb}.c{chunk_of[stage]} " if vpp > 1 else f"{letter}{mb} ").encode()
        table += b"optimizer\n"
    table += b"}\n"
    return table.decode()


def _stage_owners(rows: list[str], file: str) -> tuple[dict[int, int], int]:
    """The first pass: every cell checked, the rank holding each stage and the number of micro-batches; raises
    the cells' errors, then a stage on two ranks."""
    errors: list[Diagnostic] = []
    owner: dict[int, int] = {}
    clash: Diagnostic | None = None  # a stage on two ranks: reported when every cell is an action
    nmb, any_action = 0, False
    for r, line in enumerate(rows):
        for stage, _, mb, col in _actions(line, r + 1, file, errors):
            any_action = True
            nmb = max(nmb, mb + 1)
            held_by = owner.setdefault(stage, r)
            if held_by != r and clash is None:
                clash = Diagnostic(
                    "E020",
                    f"stage {stage} appears on rank {held_by} and on rank {r}",
                    Span(file, r + 1, col, r + 1, col + 1),
                    help="each stage runs on exactly one rank (one CSV row)",
                )
        if len(errors) >= MAX_ERRORS:
            break
    if not errors and not any_action:
        errors.append(Diagnostic("E020", "the CSV has no actions", Span(file, 1, 1, 1, 2), help="one row per rank"))
    if errors:
        raise DiagnosticError(errors)
    if clash is not None:
        raise DiagnosticError([clash])
    return owner, nmb


def _placement(owner: dict[int, int], pp: int, file: str, placement: str | None) -> tuple[str | None, dict]:
    """The placement (`looped`, `vshape`, or None: the CSV's own) and each rank's stages by chunk: the one asked
    for, checked against the CSV, or the one the CSV has."""
    stages = sorted(owner)
    nstages = len(stages)
    if stages != list(range(nstages)) or nstages % pp:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E020",
                    f"stages {stages[:8]}{'...' if nstages > 8 else ''} are not 0 .. k*{pp}-1 for {pp} ranks",
                    Span(file, 1, 1, 1, 2),
                    help="every rank must hold the same number of consecutive global stages",
                )
            ]
        )
    vpp = nstages // pp
    held: dict[int, list[int]] = {r: [] for r in range(pp)}
    for s, o in sorted(owner.items()):
        held[o].append(s)
    looped = {r: [c * pp + r for c in range(vpp)] for r in range(pp)}
    vshape = {r: [c * pp + (r if c % 2 == 0 else pp - 1 - r) for c in range(vpp)] for r in range(pp)}
    if placement is None:
        placement = "looped" if all(sorted(looped[r]) == held[r] for r in range(pp)) else None
        if placement is None and all(sorted(vshape[r]) == held[r] for r in range(pp)):
            placement = "vshape"
    if placement == "looped":
        stage_rows = looped
    elif placement == "vshape":
        stage_rows = vshape
    elif placement is None:
        stage_rows = held
    else:
        raise DiagnosticError([Diagnostic("E007", f"unknown placement `{placement}`", help="use `looped` or `vshape`")])
    for r, stage_list in stage_rows.items():
        if sorted(stage_list) != held[r]:
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E020",
                        f"rank {r} holds stages {held[r]}, which is not a {placement} placement",
                        Span(file, r + 1, 1, r + 1, 2),
                        help="leave out `--placement` to keep the CSV's own placement",
                    )
                ]
            )
    return placement, stage_rows


def _sched_header(name: str, file: str, pp: int, vpp: int, nmb: int, placement: str | None, stage_rows) -> list[str]:
    """The lines above the table's rows: its docstring, name, the sizes it was written for, its placement."""
    out = [
        '"""',
        f"{sched_docstring_text(name)}: imported from PyTorch pipelining compute-only CSV "
        f"`{sched_docstring_text(Path(file).name)}`.",
        "",
        "Re-export with `ppdsl expand --format torch-csv`.",
        '"""',
        f"schedule {sched_string(name)}",
        "",
        f'require pp == {pp} : "this table was written for pp = {pp}"',
        f'require vpp == {vpp} : "this table was written for vpp = {vpp}"',
    ]
    out.append(f'require microbatches == {nmb} : "this table was written for {nmb} micro-batches"')
    if placement in ("looped", "vshape"):
        out.append(f"placement {placement}")
    else:
        expr = "0"
        for r in reversed(range(pp)):
            for c in reversed(range(vpp)):
                expr = f"if rank == {r} and chunk == {c} then {stage_rows[r][c]} else {expr}"
        out.append(f"placement stage = {expr}")
    out += ["", "table {", ""]
    return out
