"""Complete what the program builder leaves open: op roles, and the stage (chunk id) of every backward op.

Paddle gives backward ops no chunk id and its VPP pass guesses one from the neighbouring ops
(`pass_utils.infer_chunk_id`), which breaks as soon as two stages' backward ops interleave. Here a gradient op
(`<op>_grad`) takes the stage of the forward op it differentiates: the `<op>` that touches every forward value it
reads. Other backward ops take the stage of the forward values they read (the latest stage among them: a
gradient op reads its forward op's inputs). The forward op matters where the two differ: the first op of a stage
that reads only the stage's input (RMSNorm's `pow(h, 2)`) has a gradient reading only values of the stage before.
Ops that read no forward value take the stage of what reads them, then of the op before.
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
    touching = _forward_touching(ops, index)
    # 1. a gradient op: its forward op's stage; else from operands: the latest forward stage read, else the latest
    for i, op in enumerate(ops):
        if stage[i] != UNKNOWN:
            continue
        forward, other, read = [], [], []
        for k in range(op.num_operands()):
            producer = op.operand_source(k).get_defining_op()
            j = index.get(producer) if producer is not None else None
            if j is None or stage[j] == UNKNOWN:
                continue
            if ops[j].op_role == 0:
                forward.append(stage[j])
                read.append(_key(op.operand_source(k), j))
            else:
                other.append(stage[j])
        origin = _forward_op(op, read, touching, ops) if op.op_role == 1 else None
        if origin is not None and stage[origin] != UNKNOWN:
            stage[i] = stage[origin]
        elif forward or other:
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


def _key(value, j: int) -> tuple[int, int]:
    """A value as (index of its defining op, result number)."""
    op = value.get_defining_op()
    return j, next(r for r in range(op.num_results()) if op.result(r).is_same(value))


def _forward_touching(ops, index) -> dict[tuple[int, int], set[int]]:
    """Forward value -> the forward ops that define or read it."""
    out: dict[tuple[int, int], set[int]] = {}
    for i, op in enumerate(ops):
        if op.op_role != 0:
            continue
        for r in range(op.num_results()):
            out.setdefault((i, r), set()).add(i)
        for k in range(op.num_operands()):
            producer = op.operand_source(k).get_defining_op()
            j = index.get(producer) if producer is not None else None
            if j is not None and ops[j].op_role == 0:
                out.setdefault(_key(op.operand_source(k), j), set()).add(i)
    return out


def _forward_op(op, read: list[tuple[int, int]], touching, ops) -> int | None:
    """The forward op a `<name>_grad` op differentiates: a `<name>` op touching every forward value it reads
    (the latest, if several do)."""
    name = op.name()
    if not name.endswith("_grad") or not read:
        return None
    base = name[: -len("_grad")]
    candidates = set.intersection(*(touching.get(key, set()) for key in read))
    matching = [j for j in candidates if ops[j].name() == base]
    return max(matching) if matching else None
