"""Expansion -> text: JSON, CSV, PyTorch pipelining's compute-only CSV (`0F0`, `1I2`, `0W3`), and the partition as
Megatron-LM's layout string."""

from __future__ import annotations

import csv
import io
import json

from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.layers import LayerProfile, megatron_layout
from ppdsl.common import csv_cells
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.plan.kinds import is_action


def to_dict(exp: Expansion) -> dict:
    names = exp.type_names
    ranks = []
    for r, jobs in enumerate(exp.jobs):
        row = []
        stage_row = exp.stage_of[r]
        for code in jobs:
            t, c, mb = exp.decode(code)
            row.append({"type": names[t], "chunk": c, "microbatch": mb, "stage": stage_row[c]})
        ranks.append({"rank": r, "jobs": row})
    return {
        "schedule": exp.defn.name,
        "pp": exp.pp,
        "vpp": exp.vpp,
        "microbatches": exp.microbatches,
        "params": exp.params,
        "ranks": ranks,
    }


def to_json(exp: Expansion) -> str:
    return json.dumps(to_dict(exp), indent=1)


def to_csv(exp: Expansion) -> str:
    """One row per job: rank, step, type, chunk, microbatch, stage (cells safe in a spreadsheet: `csv_cells`)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["rank", "step", "type", "chunk", "microbatch", "stage"])
    names = exp.type_names
    for r, jobs in enumerate(exp.jobs):
        for step, code in enumerate(jobs):
            t, c, mb = exp.decode(code)
            writer.writerow(csv_cells.row([r, step, names[t], c, mb, exp.stage_of[r][c]]))
    return buf.getvalue()


def torch_actions(exp: Expansion) -> list[list[str]]:
    """Per rank, the compute actions as PyTorch names them: `<global stage><F|B|I|W><micro-batch>`.

    Jobs with no torch counterpart (optimizer, auxiliary send/receive jobs) are left out: torch's compute-only
    format has no place for them.
    """
    out = []
    for r, codes in enumerate(exp.jobs):
        jobs = (exp.job(r, code) for code in codes)
        out.append([str(job) for job in jobs if job.letter is not None])
    return out


def torch_dropped(exp: Expansion) -> dict[str, int]:
    """The memory actions the torch CSV leaves out, by type name, with how many jobs: torch's compute-only format
    has F, B, I and W, so a recompute / offload / reload schedule exports as its compute alone (the auxiliary
    send/receive jobs and the optimizer have a place in torch's other passes and are not counted)."""
    names = exp.type_names
    wanted = {t for t, name in enumerate(names) if is_action(name)}
    found: dict[str, int] = {}
    if not wanted:
        return found
    codec = exp.codec
    for codes in exp.jobs:
        for t in codec.types_of(codes):
            if t in wanted:
                found[names[t]] = found.get(names[t], 0) + 1
    return found


def to_torch_csv(exp: Expansion) -> str:
    """PyTorch's compute-only CSV: one row per rank, no header, CRLF line ends (as torch's csv.writer)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    for row in torch_actions(exp):
        writer.writerow(csv_cells.row(row))  # digit-led actions (`0F0`): unchanged, but no cell runs
    return buf.getvalue()


def to_megatron_layout(exp: Expansion, profile: LayerProfile | None = None) -> str:
    """The expansion's partition as Megatron-LM's `--pipeline-model-parallel-layout` (`Et*8|t*9|t*8|t*7L`). Raises
    DiagnosticError (E106): no partition, a placement other than looped, layers Megatron cannot name."""
    if exp.stage_work is None:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E106",
                    f"`{exp.defn.name}` has no partition to write as a Megatron layout",
                    help="give one: `--partition 9,9,8,8`, `--layers FILE` (an even split), or a `partition` "
                    "statement in the file",
                )
            ]
        )
    looped = all(s == c * exp.pp + r for r, row in enumerate(exp.stage_of) for c, s in enumerate(row))
    return megatron_layout(exp.stage_work.partition, profile, looped)
