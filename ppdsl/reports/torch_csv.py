"""PyTorch pipelining's compute-only CSV -> a `.sched` literal table (`ppdsl import`).

The CSV has one row per rank and one cell per step: `<global stage><F|B|I|W><micro-batch>`, empty cells for idle
steps, and DualPipeV's `(0F3;3B1)OVERLAP_F_B` for an overlapped forward + backward (imported as the two jobs in
that order). Which stages a rank holds gives the placement: looped (stage = chunk * pp + rank), V-shaped, or
an explicit table of stages.
"""

from __future__ import annotations

import re
from pathlib import Path

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, Span
from ppdsl.common.files import CSV_BYTES, read_text
from ppdsl.common.text import shortened
from ppdsl.language.jobs import Job
from ppdsl.language.sched_text import sched_docstring_text, sched_string

_OVERLAP = re.compile(r"^\((\d+[FBIW]\d+);(\d+[FBIW]\d+)\)OVERLAP_F_B$")
_TORCH_ONLY = re.compile(r"^\d+(UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)\d*$")
MAX_ERRORS = 20
# digits of a stage or micro-batch number: Python refuses to read integers past 4300 digits, and no pipeline has a
# billion stages or micro-batches
MAX_DIGITS = 9
# a compute action's shape, to refuse an over-long number before `Job.parse` reads it (Python's int() of a
# 5000-digit string raises)
_ACTION = re.compile(r"^(\d+)(F|B|I|W)(\d+)$")


def _cells(line: str) -> list[tuple[int, str]]:
    """(1-based column, text) of each comma-separated cell; torch never quotes its cells."""
    out, col = [], 1
    for raw in line.split(","):
        out.append((col + len(raw) - len(raw.lstrip()), raw.strip()))
        col += len(raw) + 1
    return out


def _compute_action(token: str) -> Job | None:
    """The compute job a torch action names (`0F3`, `2I1`), None for anything else."""
    try:
        job = Job.parse(token)
    except ValueError:
        return None
    return job if job.letter is not None else None


def parse_torch_csv(text: str, file: str) -> list[list[tuple[int, str, int, Span]]]:
    """Rows of (stage, letter, micro-batch, span); raises DiagnosticError naming row and column."""
    rows: list[list[tuple[int, str, int, Span]]] = []
    errors: list[Diagnostic] = []
    text = text.removeprefix("\ufeff")  # a byte-order mark (spreadsheets write one) is not part of the first cell
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for row_no, line in enumerate(lines, start=1):
        actions = []
        for col, cell in _cells(line):
            if not cell:
                continue  # an idle step
            span = Span(file, row_no, col, row_no, col + len(cell))
            overlap = _OVERLAP.match(cell)
            parts = [overlap.group(1), overlap.group(2)] if overlap else [cell]
            for part in parts:
                m = _ACTION.match(part)
                if m and max(len(m.group(1)), len(m.group(3))) > MAX_DIGITS:
                    errors.append(
                        Diagnostic(
                            "E020",
                            f"row {row_no}, column {col}: `{shortened(cell)}` has a number too large for a stage or a "
                            "micro-batch",
                            span,
                            label="too large",
                            help=f"stages and micro-batches have at most {MAX_DIGITS} digits",
                        )
                    )
                    continue
                job = _compute_action(part)
                if job is not None:
                    actions.append((job.stage, job.letter, job.mb, span))
                    continue
                if _TORCH_ONLY.match(part):
                    help_text = 'export the compute-only schedule (`_dump_csv(..., format="compute_only")`)'
                else:
                    help_text = "a cell is `<stage><F|B|I|W><micro-batch>`, e.g. `0F3` or `2I1`"
                errors.append(
                    Diagnostic(
                        "E020",
                        f"row {row_no}, column {col}: `{shortened(cell)}` is not a compute action",
                        span,
                        label="not a compute action",
                        help=help_text,
                    )
                )
        rows.append(actions)
    if not errors and not any(rows):
        errors.append(Diagnostic("E020", "the CSV has no actions", Span(file, 1, 1, 1, 2), help="one row per rank"))
    if errors:
        raise DiagnosticError(errors[:MAX_ERRORS])
    return rows


def import_torch_csv(path: str | Path, name: str | None = None, placement: str | None = None) -> str:
    path = Path(path)
    text = read_text(path, CSV_BYTES)
    return torch_csv_to_sched(text, str(path), name or path.stem, placement)


def torch_csv_to_sched(text: str, file: str, name: str, placement: str | None = None) -> str:
    rows = parse_torch_csv(text, file)
    pp = len(rows)
    owner: dict[int, tuple[int, Span]] = {}
    for r, actions in enumerate(rows):
        for stage, _, _, span in actions:
            if stage in owner and owner[stage][0] != r:
                raise DiagnosticError(
                    [
                        Diagnostic(
                            "E020",
                            f"stage {stage} appears on rank {owner[stage][0]} and on rank {r}",
                            span,
                            help="each stage runs on exactly one rank (one CSV row)",
                        )
                    ]
                )
            owner.setdefault(stage, (r, span))
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
    held = {r: sorted(s for s, (o, _) in owner.items() if o == r) for r in range(pp)}
    looped = {r: [c * pp + r for c in range(vpp)] for r in range(pp)}
    vshape = {r: [c * pp + (r if c % 2 == 0 else pp - 1 - r) for c in range(vpp)] for r in range(pp)}
    if placement is None:
        placement = "looped" if all(sorted(looped[r]) == held[r] for r in range(pp)) else None
        if placement is None and all(sorted(vshape[r]) == held[r] for r in range(pp)):
            placement = "vshape"
    chunk_of: dict[int, int] = {}
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
        for c, s in enumerate(stage_list):
            chunk_of[s] = c

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
    mbs = [mb for actions in rows for _, _, mb, _ in actions]
    nmb = max(mbs) + 1
    out.append(f'require microbatches == {nmb} : "this table was written for {nmb} micro-batches"')
    if placement in ("looped", "vshape"):
        out.append(f"placement {placement}")
    else:
        expr = "0"
        for r in reversed(range(pp)):
            for c in reversed(range(vpp)):
                expr = f"if rank == {r} and chunk == {c} then {stage_rows[r][c]} else {expr}"
        out.append(f"placement stage = {expr}")
    out.append("")
    out.append("table {")
    for r, actions in enumerate(rows):
        cells = []
        for stage, letter, mb, _ in actions:
            cells.append(f"{letter}{mb}" + (f".c{chunk_of[stage]}" if vpp > 1 else ""))
        cells.append("optimizer")
        out.append(f"    rank {r}: " + " ".join(cells))
    out.append("}")
    return "\n".join(out) + "\n"
