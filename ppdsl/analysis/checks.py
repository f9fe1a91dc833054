"""Per-rank checks of an Expansion: completeness (S101, S102, S104, S107) and local order (S103).

Each rank owns every (job type, chunk, micro-batch) of its chunks: a forward, and either a backward or a
backward_b + backward_w pair, and one of each auxiliary job type the schedule uses; the optimizer runs once,
last. Forward precedes backward / backward_b, backward_b precedes backward_w, and auxiliary jobs keep their
declared `before` / `after` side of their anchor.

One function per diagnostic code, dispatched from `CHECKS`: adding a check means adding a function and a row.
Each reads a `RankJobs`, built once per rank in one pass over its jobs (where each job runs), so a check is a
walk over the rank's (chunk, micro-batch) pairs and never searches the order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic, Span, number_text
from ppdsl.language.jobtypes import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD, OPTIMIZER

MAX_PER_KIND = 12  # diagnostics of one code kept in full; the rest are counted


@dataclass
class _Collector:
    diagnostics: list[Diagnostic]
    counts: dict[str, int]

    def add(self, diag: Diagnostic) -> None:
        n = self.counts.get(diag.code, 0)
        self.counts[diag.code] = n + 1
        if n < MAX_PER_KIND:
            self.diagnostics.append(diag)

    def finish(self) -> list[Diagnostic]:
        for code, n in self.counts.items():
            if n > MAX_PER_KIND:
                self.diagnostics.append(
                    Diagnostic(code, f"... and {n - MAX_PER_KIND} more `{code}` errors like the ones above")
                )
        return self.diagnostics


@dataclass
class RankJobs:
    """One rank's order indexed by job: `pos[code]` is the step of job `code` (-1: never runs), for codes of
    micro-batches 0 .. microbatches - 1; `outside` lists the steps of jobs of other micro-batches, `repeats`
    (step, first step) of jobs that run again."""

    exp: Expansion
    rank: int
    aux: list[int]  # the auxiliary job types the schedule uses
    pos: list[int]
    outside: list[int]
    repeats: list[tuple[int, int]]

    def span(self, step: int) -> Span:
        """Where the job at `step` was emitted."""
        return self.exp.defn.sites[self.exp.sites[self.rank][step]].span

    @property
    def end_span(self) -> Span:
        """Where the order ends: the statement of the rank's last job (the order's own span if it has none)."""
        sites = self.exp.sites[self.rank]
        return self.exp.defn.sites[sites[-1] if sites else 0].span

    def backward_split(self, base: int) -> tuple[int, int, int] | None:
        """Steps of (backward, backward_b, backward_w) of the micro-batch whose codes start at `base`, or None when it
        has both a whole and a split backward (S102 reports it; the other checks skip it)."""
        pos = self.pos
        b, bb, bw = pos[base + BACKWARD], pos[base + BACKWARD_B], pos[base + BACKWARD_W]
        if b >= 0 and (bb >= 0 or bw >= 0):
            return None
        return b, bb, bw

    def bases(self):
        """The first code of every (chunk, micro-batch) the rank owns, with that chunk and micro-batch."""
        exp = self.exp
        ntypes, vpp = exp.ntypes, exp.vpp
        for c in range(vpp):
            for mb in range(exp.microbatches):
                yield (mb * vpp + c) * ntypes, c, mb


def index_rank(exp: Expansion, rank: int, aux: list[int]) -> RankJobs:
    size = exp.microbatches * exp.vpp * exp.ntypes
    pos = [-1] * size
    outside: list[int] = []
    repeats: list[tuple[int, int]] = []
    for i, code in enumerate(exp.jobs[rank]):
        if code >= size:
            outside.append(i)
        elif pos[code] >= 0:
            repeats.append((i, pos[code]))
        else:
            pos[code] = i
    return RankJobs(exp, rank, aux, pos, outside, repeats)


def used_types(exp: Expansion) -> set[int]:
    """Job types that occur anywhere in the expansion."""
    ntypes = exp.ntypes
    seen: set[int] = set()
    for jobs in exp.jobs:
        seen.update({code % ntypes for code in jobs})
        if len(seen) == ntypes:
            break
    return seen


# ---------------------------------------------------------------------------------------------- one check per code


def micro_batch_range(view: RankJobs, out: _Collector) -> None:
    """S107: a job of a micro-batch the sizes do not have."""
    exp, m = view.exp, view.exp.microbatches
    for i in view.outside:
        code = exp.jobs[view.rank][i]
        _, _, mb = exp.decode(code)
        out.add(
            Diagnostic(
                "S107",
                f"micro-batch {number_text(mb)} does not exist: there are {m} micro-batches (0 .. {m - 1})",
                view.span(i),
                label=f"rank {view.rank} step {i} runs `{exp.label(code)}`",
                help="count the jobs this statement emits for these sizes",
            )
        )


def duplicates(view: RankJobs, out: _Collector) -> None:
    """S102: a job that runs twice, or a micro-batch with both a whole and a split backward."""
    exp, rank = view.exp, view.rank
    jobs = exp.jobs[rank]
    for i, first in view.repeats:
        out.add(
            Diagnostic(
                "S102",
                f"`{exp.label(jobs[i])}` runs twice on rank {rank}",
                view.span(i),
                label=f"again at step {i}, first at step {first}",
                help="each job runs exactly once per micro-batch",
            )
        )
    for base, c, mb in view.bases():
        if view.backward_split(base) is None:
            out.add(
                Diagnostic(
                    "S102",
                    f"micro-batch {mb} chunk {c} has both a full backward and a split one on rank {rank}",
                    view.span(view.pos[base + BACKWARD]),
                    label=f"`{exp.label(base + BACKWARD)}` here",
                    help="use either `backward` or `backward_b` + `backward_w` for a micro-batch",
                )
            )


def optimizer(view: RankJobs, out: _Collector) -> None:
    """S104: the optimizer is missing, or is not the rank's last job."""
    exp, rank = view.exp, view.rank
    jobs = exp.jobs[rank]
    ntypes = exp.ntypes
    steps = [i for i, code in enumerate(jobs) if code % ntypes == OPTIMIZER]
    if not steps:
        out.add(
            Diagnostic(
                "S104",
                f"rank {rank} never runs the optimizer",
                view.end_span,
                label="the order ends here",
                help="end the order with `optimizer`",
            )
        )
    elif len(steps) == 1 and steps[0] != len(jobs) - 1:
        out.add(
            Diagnostic(
                "S104",
                f"the optimizer is not the last job on rank {rank}",
                view.span(steps[0]),
                label=f"runs at step {steps[0]} of {len(jobs)}",
                help="move `optimizer` to the end of the order",
            )
        )


def local_order(view: RankJobs, out: _Collector) -> None:
    """S103: a backward before its forward, a weight gradient before its input gradient, an auxiliary job on the
    wrong side of the job it serves."""
    exp, rank, pos = view.exp, view.rank, view.pos
    for base, c, mb in view.bases():
        split = view.backward_split(base)
        if split is None:
            continue
        b, bb, bw = split
        if b < 0 and bb < 0 and bw < 0:
            continue  # no backward at all: S101's, and the micro-batch's auxiliary jobs are not looked at
        f = pos[base + FORWARD]
        grad = b if b >= 0 else bb
        if f >= 0 and grad >= 0 and grad < f:
            gcode = base + (BACKWARD if b >= 0 else BACKWARD_B)
            out.add(
                Diagnostic(
                    "S103",
                    f"backward of micro-batch {mb} runs before its forward on rank {rank}"
                    + (f" (chunk {c})" if exp.vpp > 1 else ""),
                    view.span(grad),
                    label=f"`{exp.label(gcode)}` runs at step {grad}; `{exp.label(base)}` runs at step {f}",
                    help="a backward needs the activations of its own forward: move it later",
                )
            )
        if b < 0 and bb >= 0 and bw >= 0 and bw < bb:
            weight, inputs = exp.label(base + BACKWARD_W), exp.label(base + BACKWARD_B)
            out.add(
                Diagnostic(
                    "S103",
                    f"weight gradient of micro-batch {mb} runs before its input gradient on rank {rank}",
                    view.span(bw),
                    label=f"`{weight}` at step {bw}, `{inputs}` at step {bb}",
                    help="run `backward_w` after the `backward_b` of the same micro-batch",
                )
            )
        for t in view.aux:
            if pos[base + t] >= 0:
                _anchor(view, base, t, out)


def _anchor(view: RankJobs, base: int, t: int, out: _Collector) -> None:
    exp, pos = view.exp, view.pos
    jt = exp.defn.job_types[t]
    anchor_name = jt.before or jt.after
    if anchor_name is None:
        return
    p = pos[base + t]
    anchor_t = exp.defn.type_index(anchor_name)
    a = pos[base + anchor_t]
    if anchor_t == BACKWARD and a < 0:
        a = pos[base + BACKWARD_B]  # a split backward anchors on its input-gradient part
    if a < 0:
        return
    if (jt.before is not None and p > a) or (jt.after is not None and p < a):
        side = "before" if jt.before else "after"
        out.add(
            Diagnostic(
                "S103",
                f"`{exp.label(base + t)}` must run {side} `{exp.label(base + anchor_t)}` on rank {view.rank}",
                view.span(p),
                label=f"runs at step {p}; `{exp.label(base + anchor_t)}` at step {a}",
                help=f"`{jt.name}` is declared `{side} {anchor_name}`",
            )
        )


def missing_jobs(view: RankJobs, out: _Collector) -> None:
    """S101: a job the rank owns that it never runs."""
    exp, pos = view.exp, view.pos
    missing: list[str] = []
    for base, _, _ in view.bases():
        if pos[base + FORWARD] < 0:
            missing.append(exp.label(base + FORWARD))
        split = view.backward_split(base)
        if split is None:
            continue
        b, bb, bw = split
        if b < 0:
            if bb < 0 and bw < 0:
                missing.append(exp.label(base + BACKWARD))
                continue
            missing += [exp.label(base + t) for t in (BACKWARD_B, BACKWARD_W) if pos[base + t] < 0]
        missing += [exp.label(base + t) for t in view.aux if pos[base + t] < 0]
    if missing:
        vpp, m = exp.vpp, exp.microbatches
        shown = ", ".join(f"`{x}`" for x in missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        out.add(
            Diagnostic(
                "S101",
                f"rank {view.rank} never runs {len(missing)} job{'s' if len(missing) > 1 else ''} it owns",
                view.end_span,
                label=f"missing {shown}",
                help=f"every rank runs a forward and a backward of each of its {vpp} chunk(s) "
                f"for all {m} micro-batches",
            )
        )


# Every per-rank check, by the code it reports, in the order its diagnostics are listed.
CHECKS: tuple[tuple[str, Callable[[RankJobs, _Collector], None]], ...] = (
    ("S107", micro_batch_range),
    ("S102", duplicates),
    ("S104", optimizer),
    ("S103", local_order),
    ("S101", missing_jobs),
)


def check_ranks(exp: Expansion) -> list[Diagnostic]:
    out = _Collector([], {})
    used = used_types(exp)
    aux = [t for t, jt in enumerate(exp.defn.job_types) if not jt.builtin and t in used]
    for rank in range(exp.pp):
        view = index_rank(exp, rank, aux)
        for _, check in CHECKS:
            check(view, out)
    return out.finish()
