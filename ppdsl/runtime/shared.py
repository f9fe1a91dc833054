"""Parameters several stages hold (a tied embedding and LM head), kept in step by the schedule's `sync_shared`.

The model tracer gives each stage that uses a shared parameter a copy of its own (ppdsl/runtime/layers.py), so
each stage's backward accumulates only its part of the gradient. At the rank's `sync_shared` job the parts are
summed: first over the copies this rank holds, then (when the copies sit on several ranks) all-reduced among those
ranks, one gloo group per set of holder ranks; every copy's accumulator then holds the whole gradient, and every
copy takes the same update, the one the tied parameter takes when one stage holds it all.

A collective every holder must join is a point the schedule has to give: a holder whose order has no
`sync_shared` would leave the others waiting forever, so such a model and schedule are refused before training
(E095, `check_sync_places`), naming the parameter, its stages and the rank to add the job to.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.plan.kinds import SYNC_SHARED_NAME


def holders(copies: Sequence[str], param_stage: Mapping[str, int], rank_of_stage: Sequence[int]) -> list[int]:
    """The pipeline ranks holding a copy of one shared parameter, ascending."""
    return sorted({rank_of_stage[param_stage[c]] for c in copies})


def check_sync_places(plan, shared: Mapping[str, Sequence[str]], param_stage: Mapping[str, int]) -> None:
    """E095 unless every rank holding a copy of a shared parameter has a `sync_shared` job in its order."""
    rank_of_stage = [r for r, _ in plan.rank_of_stage()]
    syncing = {
        r for r, order in enumerate(plan.orders) if any(plan.job_types[j[0]].name == SYNC_SHARED_NAME for j in order)
    }
    problems = []
    for name, copies in sorted(shared.items()):
        stages = sorted(param_stage[c] for c in copies)
        ranks = holders(copies, param_stage, rank_of_stage)
        missing = [r for r in ranks if r not in syncing]
        if not missing:
            continue
        where = ", ".join(f"rank {r}" for r in missing)
        problems.append(
            Diagnostic(
                "E095",
                f"parameter `{name}` is shared by stages {', '.join(map(str, stages))} (ranks "
                f"{', '.join(map(str, ranks))}), but the order of {where} has no `sync_shared`: its copies' "
                "gradients would never be summed",
                help=f"add `sync_shared` to the order of every rank holding it ({', '.join(map(str, ranks))}), "
                "after its last backward and before `optimizer` (e.g. the line before `optimizer`)",
            )
        )
    if problems:
        raise DiagnosticError(problems)


@dataclass
class SharedSync:
    """One rank's part of `sync_shared`: for each set of holder ranks, the accumulators of the copies this rank
    holds (`local`: one list per shared parameter) and the gloo group of those ranks (None: all on this rank)."""

    paddle: object
    scope: object
    place: object
    sets: list[tuple[list[list[str]], object]]  # (per shared parameter, its local copies' accumulators; group)
    seconds: float = 0.0
    log: list[tuple[float, float, int]] = field(default_factory=list)

    def sync(self) -> None:
        for params, group in self.sets:
            totals = [sum(np.array(self.scope.find_var(a).get_tensor()) for a in accs) for accs in params]
            if group is not None:
                totals = self._all_reduce(totals, group)
            for accs, total in zip(params, totals, strict=True):
                for a in accs:
                    self.scope.find_var(a).get_tensor().set(np.ascontiguousarray(total), self.place)

    def _all_reduce(self, arrays: list[np.ndarray], group) -> list[np.ndarray]:
        paddle = self.paddle
        flat = np.concatenate([a.reshape(-1) for a in arrays]).astype(np.float32, copy=False)
        t0 = time.perf_counter()
        with paddle.base.dygraph.guard(self.place):  # an eager tensor in static mode needs a dygraph guard
            buffer = paddle.to_tensor(flat)
            group.process_group.all_reduce(buffer, paddle.base.core.ReduceOp.SUM, True)
            total = buffer.numpy()
        t1 = time.perf_counter()
        self.seconds += t1 - t0
        self.log.append((t0, t1, flat.nbytes))
        out, at = [], 0
        for a in arrays:
            out.append(total[at : at + a.size].reshape(a.shape).astype(a.dtype, copy=False))
            at += a.size
        return out
