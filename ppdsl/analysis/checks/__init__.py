"""Per-rank checks of an Expansion: completeness (S101, S102, S104, S107), local order (S103) and where the
memory actions run (S115-S118: recompute, offload, reload between a micro-batch's forward and its backward).

Each rank owns every (job type, chunk, micro-batch) of its chunks: a forward, and either a backward or a
backward_b + backward_w pair, and one of each auxiliary job type the schedule uses; the optimizer runs once,
last. Forward precedes backward / backward_b, backward_b precedes backward_w, and auxiliary jobs keep their
declared `before` / `after` side of their anchor.

A check is one module of this package: one function, registered with the code it reports and the renderers of
its findings (`registry.py`),

    @rank_check("S104", _render_no_optimizer, _render_optimizer_early)
    def optimizer(view: RankJobs, out: Findings) -> None:
        ...
        out.add(_render_no_optimizer, view.end_site, view.rank)

so a new check is that module (with its renderers beside the function, in the words of `wording.py`), its line
below, and its code's row in `ppdsl.common.codes` / `ppdsl.common.explanations`. Each reads a `RankJobs`
(`rank_jobs.py`), built once per rank in one pass over its jobs (where each job runs), so a check is a walk over
the rank's (chunk, micro-batch) pairs and never searches the order. A check records findings; the findings of one
renderer at one statement become one diagnostic that names every rank and micro-batch they concern ("on ranks
0-3, micro-batches 0-7"), as one mistake is one statement, however many ranks run it.
"""

from __future__ import annotations

# The order of these imports is the order the checks run in and their diagnostics are listed in.
# isort: off
from ppdsl.analysis.checks import micro_batch_range  # noqa: F401 (each module registers its check)
from ppdsl.analysis.checks import duplicates  # noqa: F401
from ppdsl.analysis.checks import optimizer  # noqa: F401
from ppdsl.analysis.checks import local_order  # noqa: F401
from ppdsl.analysis.checks import missing_jobs  # noqa: F401
from ppdsl.analysis.checks import memory_action_order  # noqa: F401
from ppdsl.analysis.checks import collectives  # noqa: F401

# isort: on
from ppdsl.analysis.checks.rank_jobs import RankJobs, index_rank, used_types
from ppdsl.analysis.checks.registry import MAX_NOTES, RANK_CHECKS, Findings, check_ranks, rank_check

__all__ = ["MAX_NOTES", "RANK_CHECKS", "Findings", "RankJobs", "check_ranks", "index_rank", "rank_check", "used_types"]
