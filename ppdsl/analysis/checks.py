"""Per-rank checks of an Expansion: completeness (S101, S102, S104, S107) and local order (S103).

Each rank owns every (job type, chunk, micro-batch) of its chunks: a forward, and either a backward or a
backward_b + backward_w pair, and one of each auxiliary job type the schedule uses; the optimizer runs once,
last. Forward precedes backward / backward_b, backward_b precedes backward_w, and auxiliary jobs keep their
declared `before` / `after` side of their anchor.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic, number_text
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


def used_types(exp: Expansion) -> set[int]:
    """Job types that occur anywhere in the expansion."""
    ntypes = exp.ntypes
    seen: set[int] = set()
    for jobs in exp.jobs:
        seen.update({code % ntypes for code in jobs})
        if len(seen) == ntypes:
            break
    return seen


def check_ranks(exp: Expansion) -> list[Diagnostic]:
    out = _Collector([], {})
    used = used_types(exp)
    aux = [t for t, jt in enumerate(exp.defn.job_types) if not jt.builtin and t in used]
    for rank in range(exp.pp):
        _check_rank(exp, rank, aux, out)
    return out.finish()


def _check_rank(exp: Expansion, rank: int, aux: list[int], out: _Collector) -> None:
    ntypes, vpp, m = exp.ntypes, exp.vpp, exp.microbatches
    size = m * vpp * ntypes
    jobs, sites = exp.jobs[rank], exp.sites[rank]
    pos = [-1] * size
    span_of = exp.defn.sites
    for i, code in enumerate(jobs):
        if code >= size:
            t, c, mb = exp.decode(code)
            out.add(
                Diagnostic(
                    "S107",
                    f"micro-batch {number_text(mb)} does not exist: there are {m} micro-batches (0 .. {m - 1})",
                    span_of[sites[i]].span,
                    label=f"rank {rank} step {i} runs `{exp.label(code)}`",
                    help="count the jobs this statement emits for these sizes",
                )
            )
            continue
        if pos[code] >= 0:
            t, c, mb = exp.decode(code)
            first = pos[code]
            out.add(
                Diagnostic(
                    "S102",
                    f"`{exp.label(code)}` runs twice on rank {rank}",
                    span_of[sites[i]].span,
                    label=f"again at step {i}, first at step {first}",
                    help="each job runs exactly once per micro-batch",
                )
            )
            continue
        pos[code] = i

    # The optimizer: once, last, micro-batch 0.
    opt_positions = [i for i, code in enumerate(jobs) if code % ntypes == OPTIMIZER]
    order_span = span_of[0].span if not sites else span_of[sites[-1]].span
    if not opt_positions:
        out.add(
            Diagnostic(
                "S104",
                f"rank {rank} never runs the optimizer",
                order_span,
                label="the order ends here",
                help="end the order with `optimizer`",
            )
        )
    else:
        last = opt_positions[-1]
        if len(opt_positions) == 1 and last != len(jobs) - 1:
            out.add(
                Diagnostic(
                    "S104",
                    f"the optimizer is not the last job on rank {rank}",
                    span_of[sites[last]].span,
                    label=f"runs at step {last} of {len(jobs)}",
                    help="move `optimizer` to the end of the order",
                )
            )

    missing: list[str] = []
    order_errors = 0

    def need(code: int) -> int:
        p = pos[code]
        if p < 0:
            missing.append(exp.label(code))
        return p

    for c in range(vpp):
        for mb in range(m):
            base = (mb * vpp + c) * ntypes
            f = need(base + FORWARD)
            b, bb, bw = pos[base + BACKWARD], pos[base + BACKWARD_B], pos[base + BACKWARD_W]
            if b >= 0 and (bb >= 0 or bw >= 0):
                out.add(
                    Diagnostic(
                        "S102",
                        f"micro-batch {mb} chunk {c} has both a full backward and a split one on rank {rank}",
                        span_of[sites[b]].span,
                        label=f"`{exp.label(base + BACKWARD)}` here",
                        help="use either `backward` or `backward_b` + `backward_w` for a micro-batch",
                    )
                )
                continue
            if b < 0:
                if bb < 0 and bw < 0:
                    missing.append(exp.label(base + BACKWARD))
                    continue
                bb, bw = need(base + BACKWARD_B), need(base + BACKWARD_W)
            grad = b if b >= 0 else bb
            if f >= 0 and grad >= 0 and grad < f:
                order_errors += 1
                gcode = base + (BACKWARD if b >= 0 else BACKWARD_B)
                out.add(
                    Diagnostic(
                        "S103",
                        f"backward of micro-batch {mb} runs before its forward on rank {rank}"
                        + (f" (chunk {c})" if vpp > 1 else ""),
                        span_of[sites[grad]].span,
                        label=f"`{exp.label(gcode)}` runs at step {grad}; `{exp.label(base)}` runs at step {f}",
                        help="a backward needs the activations of its own forward: move it later",
                    )
                )
            if bb >= 0 and bw >= 0 and bw < bb:
                out.add(
                    Diagnostic(
                        "S103",
                        f"weight gradient of micro-batch {mb} runs before its input gradient on rank {rank}",
                        span_of[sites[bw]].span,
                        label=f"`{exp.label(base + BACKWARD_W)}` at step {bw}, "
                        f"`{exp.label(base + BACKWARD_B)}` at step {bb}",
                        help="run `backward_w` after the `backward_b` of the same micro-batch",
                    )
                )
            for t in aux:
                p = need(base + t)
                if p >= 0:
                    _check_anchor(exp, rank, base, t, p, pos, sites, out)

    if missing:
        shown = ", ".join(f"`{x}`" for x in missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        out.add(
            Diagnostic(
                "S101",
                f"rank {rank} never runs {len(missing)} job{'s' if len(missing) > 1 else ''} it owns",
                order_span,
                label=f"missing {shown}",
                help=f"every rank runs a forward and a backward of each of its {vpp} chunk(s) "
                f"for all {m} micro-batches",
            )
        )


def _check_anchor(exp: Expansion, rank, base, t, p, pos, sites, out: _Collector) -> None:
    jt = exp.defn.job_types[t]
    anchor_name = jt.before or jt.after
    if anchor_name is None:
        return
    anchor_t = exp.defn.type_index(anchor_name)
    a = pos[base + anchor_t]
    if anchor_t == BACKWARD and a < 0:
        a = pos[base + BACKWARD_B]  # a split backward anchors on its input-gradient part
    if a < 0:
        return
    bad = (jt.before is not None and p > a) or (jt.after is not None and p < a)
    if bad:
        side = "before" if jt.before else "after"
        out.add(
            Diagnostic(
                "S103",
                f"`{exp.label(base + t)}` must run {side} `{exp.label(base + anchor_t)}` on rank {rank}",
                exp.defn.sites[sites[p]].span,
                label=f"runs at step {p}; `{exp.label(base + anchor_t)}` at step {a}",
                help=f"`{jt.name}` is declared `{side} {anchor_name}`",
            )
        )
