"""The GPU path between ranks: Paddle's static point-to-point ops in the program itself.

Where a value computed on one rank is read on another, a `pd_op.send_v2` goes right after the op that computes
it (on the producer's stage and op role) and a `pd_op.recv_v2` right before its first reader on the other rank,
whose uses it replaces. That is how Paddle's auto-parallel programs arrive at its pipeline passes, so the
schedule's declared job types place them as Paddle does: a forward-region receive in `recv_forward`, a
backward-region send in `send_backward`, and the schedule's stream rules put them on `send_stream_{ring_id}` /
`recv_stream_{ring_id}`. Each rank then runs its own plan on the standalone executor; the order of sends and
receives on every ring is the schedule's, which `ppdsl check` proves deadlock-free.

This machine has no GPU and Paddle's CPU build has no kernel for these ops ("Do not support send for cpu kernel
now"), so here the path is built and checked structurally (tests/runtime/test_p2p.py: every send pairs with a receive of
the same shape, in the same order, on the same ring), not run.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """A directed link between two ranks, on communication ring `ring_id` whose ranks are `ranks`."""

    src: int
    dst: int
    ring_id: int
    ranks: tuple[int, int]

    def peer_of(self, rank: int) -> int:
        """The index in the ring of the other end, as send_v2 / recv_v2 take it."""
        other = self.dst if rank == self.src else self.src
        return self.ranks.index(other)


def insert_p2p(main, stages: list[int], rank_of_stage: dict[int, int], links: dict[tuple[int, int], Link]) -> int:
    """Insert send_v2 / recv_v2 pairs for every value read on another rank than the one computing it.

    `stages` gives each op's stage (by index, before insertion). Returns the number of pairs inserted.
    """
    import paddle
    from paddle.base.framework import pir_chunk_id_guard, pir_op_role_guard

    ops = list(main.global_block().ops)
    index = {op: i for i, op in enumerate(ops)}
    crossings: dict[tuple[int, int, int], list[int]] = {}  # (producer op, result, consumer rank) -> consumer ops
    for i, op in enumerate(ops):
        if stages[i] < 0:
            continue
        for k in range(op.num_operands()):
            value = op.operand_source(k)
            producer = value.get_defining_op()
            j = index.get(producer) if producer is not None else None
            if j is None or value.persistable or producer.name() == "pd_op.data" or stages[j] < 0:
                continue
            src, dst = rank_of_stage[stages[j]], rank_of_stage[stages[i]]
            if src == dst:
                continue
            r = next(r for r in range(producer.num_results()) if producer.result(r).is_same(value))
            crossings.setdefault((j, r, dst), []).append(i)
    for (j, r, dst), readers in sorted(crossings.items()):
        producer, value = ops[j], ops[j].result(r)
        src = rank_of_stage[stages[j]]
        link = links[(src, dst)]
        with pir_op_role_guard(producer.op_role), pir_chunk_id_guard(stages[j]):
            paddle.pir.set_insertion_point_after(producer)
            paddle._C_ops.send_v2(value, link.ring_id, link.peer_of(src), True, False)
        first = ops[min(readers)]
        with pir_op_role_guard(first.op_role), pir_chunk_id_guard(stages[min(readers)]):
            paddle.pir.set_insertion_point(first)
            received = paddle._C_ops.recv_v2(
                list(value.shape), value.dtype, link.peer_of(dst), link.ring_id, True, False
            )
        for i in readers:
            reader = ops[i]
            for k in range(reader.num_operands()):
                if reader.operand_source(k).is_same(value):
                    reader.operand(k).set_source(received)
    paddle.pir.set_insertion_point_to_block_end(main.global_block())
    return len(crossings)


def ring_links(rank_of_stage: list[int], first_ring_id: int = 1) -> dict[tuple[int, int], Link]:
    """One ring per direction of each link between consecutive stages on different ranks (as the CPU transport
    uses one gloo group per direction), numbered from `first_ring_id` in a fixed order."""
    pairs = sorted({(min(a, b), max(a, b)) for a, b in itertools.pairwise(rank_of_stage) if a != b})
    links = {}
    ring = first_ring_id
    for a, b in pairs:
        for src, dst in ((a, b), (b, a)):
            links[(src, dst)] = Link(src, dst, ring, (a, b))
            ring += 1
    return links
