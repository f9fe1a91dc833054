"""The GPU path, checked structurally on CPU: send_v2 / recv_v2 in each rank's job programs pair up.

Paddle's CPU build cannot run these ops, so each rank's plan is built (`build_plan(..., rank=r, p2p=links)`) and
the ops its jobs would issue are listed in plan order: on every ring, the k-th send of one end must meet the
k-th receive of the other, for the same micro-batch and the same shape, and the schedule's stream rules must be
on them.
"""

from __future__ import annotations

import importlib.util
from collections import defaultdict

import pytest

from ppdsl.analysis.expand import expand
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")


def _rank_events(exp, rank, links):
    from ppdsl.analysis.plan_spec import expansion_spec
    from ppdsl.runtime.builtin_models import BUILTIN
    from ppdsl.runtime.env import import_paddle
    from ppdsl.runtime.plan import build_plan
    from ppdsl.runtime.program import build_training_program

    paddle = import_paddle()
    program = build_training_program(
        paddle, BUILTIN, micro_batch_size=2, num_stages=exp.nstages, microbatches=exp.microbatches, lr=0.1
    )
    built = build_plan(program.main, program.startup, expansion_spec(exp), rank=rank, p2p=links)
    events = []
    for job in built.plan.job_list():
        for op in built.programs[job.type()].global_block().ops:
            if op.name() in ("pd_op.send_v2", "pd_op.recv_v2"):
                attrs = op.attrs()
                shape = list(op.operand_source(0).shape) if op.name() == "pd_op.send_v2" else list(op.result(0).shape)
                events.append((job.type(), job.micro_batch_id(), op.name(), attrs, shape))
    return events


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("stem", "pp", "m", "vpp"), [("1f1b", 2, 3, 1), ("1f1b", 4, 4, 1), ("vpp", 2, 4, 2), ("zbh1", 2, 2, 1)]
)
def test_sends_and_receives_pair_on_every_ring(stem, pp, m, vpp):
    from ppdsl.runtime.p2p import ring_links

    exp = expand(load(library_dir() / f"{stem}.sched"), pp, m, vpp)
    links = ring_links([r for r, _ in exp.rank_of_stage()])
    ring_of = {link.ring_id: link for link in links.values()}
    sends, recvs = defaultdict(list), defaultdict(list)
    for rank in range(pp):
        for job, mb, name, attrs, shape in _rank_events(exp, rank, links):
            link = ring_of[attrs["ring_id"]]
            if name == "pd_op.send_v2":
                assert rank == link.src and link.ranks[attrs["peer"]] == link.dst, (job, attrs)
                sends[link.ring_id].append((mb, shape))
            else:
                assert rank == link.dst and link.ranks[attrs["peer"]] == link.src, (job, attrs)
                recvs[link.ring_id].append((mb, shape))
            if stem in ("1f1b", "vpp"):  # their rules: Paddle's _pir_overlap_send_recv
                kind = "send" if name == "pd_op.send_v2" else "recv"
                assert attrs["execution_stream"] == f"{kind}_stream_{attrs['ring_id']}"
                assert attrs["scheduling_priority"] == 0
    assert sends and set(sends) == set(recvs)
    for ring in sends:
        assert sends[ring] == recvs[ring], f"ring {ring} ({ring_of[ring]}) does not pair up"
    # an activation and a gradient per micro-batch and per link between consecutive stages on different ranks
    crossings = sum(1 for s in range(exp.nstages - 1) if exp.rank_of_stage()[s][0] != exp.rank_of_stage()[s + 1][0])
    assert sum(len(v) for v in sends.values()) == 2 * crossings * m


def test_paddles_own_job_types_hold_the_transfers():
    """As in Paddle's 1F1B: rank 1 receives in recv_forward and sends in send_backward."""
    from ppdsl.runtime.p2p import ring_links

    exp = expand(load(library_dir() / "1f1b.sched"), 2, 2)
    links = ring_links([0, 1])
    rank1 = {(job, name) for job, _, name, _, _ in _rank_events(exp, 1, links)}
    assert rank1 == {("recv_forward", "pd_op.recv_v2"), ("send_backward", "pd_op.send_v2")}
    rank0 = {(job, name) for job, _, name, _, _ in _rank_events(exp, 0, links)}
    assert rank0 == {("forward", "pd_op.send_v2"), ("backward", "pd_op.recv_v2")}
