"""Complete what the program builder leaves open: op roles, and the stage (chunk id) of every backward op.

Paddle gives backward ops no chunk id and its VPP pass guesses one from the neighbouring ops
(`pass_utils.infer_chunk_id`), which breaks as soon as two stages' backward ops interleave. Here a backward op
takes the stage of the forward values it reads (a gradient op reads its forward op's inputs, and the latest
stage among them is its own); ops that read none take the stage of what reads them, then of the op before.
"""

from __future__ import annotations

UNKNOWN = -1


def complete_roles(main) -> None:
    from paddle.distributed.passes.pass_utils import forward_complete_op_role

    forward_complete_op_role(main)


def op_stages(main) -> list[int]:
    """Stage of every op of the global block, by index (UNKNOWN for stage-less optimizer-region ops)."""
    ops = main.global_block().ops
    stage = [op.chunk_id if op.has_attr("chunk_id") else UNKNOWN for op in ops]
    index = {op: i for i, op in enumerate(ops)}
    # 1. from operands: the latest forward stage read, else the latest stage read
    for i, op in enumerate(ops):
        if stage[i] != UNKNOWN:
            continue
        forward, other = [], []
        for k in range(op.num_operands()):
            producer = op.operand_source(k).get_defining_op()
            j = index.get(producer) if producer is not None else None
            if j is None or stage[j] == UNKNOWN:
                continue
            (forward if ops[j].op_role == 0 else other).append(stage[j])
        if forward or other:
            stage[i] = max(forward or other)
    # 2. from users, last op first, so chains of constants resolve
    for i in range(len(ops) - 1, -1, -1):
        if stage[i] != UNKNOWN or ops[i].op_role == 2:
            continue
        users = [index[u] for r in ops[i].results() for u in r.all_used_ops() if u in index]
        known = [stage[j] for j in users if stage[j] != UNKNOWN]
        if known:
            stage[i] = max(known)
    # 3. from the op before (what Paddle does), for anything still open outside the optimizer
    for i in range(len(ops)):
        if stage[i] == UNKNOWN and ops[i].op_role != 2 and i > 0:
            stage[i] = stage[i - 1]
    return stage


def stamp_stages(main, stages: list[int]) -> None:
    """Write inferred stages into the ops' `chunk_id`, so ops derived later (the backward_b / backward_w
    matmuls split from a `matmul_grad`, which copy its chunk id) land on the right stage: inferring after the
    split would put a weight-gradient reshape that reads only a stage-boundary activation on the stage before."""
    for op, stage in zip(main.global_block().ops, stages, strict=True):
        if stage != UNKNOWN and op.chunk_id != stage:
            op.set_int_attr("chunk_id", stage)
