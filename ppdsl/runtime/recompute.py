"""The recompute job's program, and the seeds that make its random ops draw what the forward drew.

`recompute_program` is a clone of the stage's forward job program that publishes only the activations the
recompute stands for (all, or a fraction: `memory_jobs.select`) and drops every op none of them needs. It reads
what the forward read (the stage input by name, fed inputs, parameters), so the forward before it keeps just
those, and it writes the activations under the names the backward reads them by.

Random ops. Paddle's PIR recompute pass (`auto_parallel_recompute_pir.py`) does not clone a `seed` op that feeds a
dropout, so the recomputed dropout reads the forward's seed value; the old-IR pass inserts those seed ops
(`modify_forward_desc_for_recompute`); `fleet.recompute` in dygraph saves and restores the generator state
around the replay (`get_rng_state` / `set_rng_state`). PIR programs have no op that saves generator state, so
this is the first way: `seed_random_ops` gives every dropout that would draw from the generator (`fix_seed`
false, no seed tensor) a seed tensor drawn by a `randint` op just before it, and the recompute reads that seed
by name instead of drawing again. The forward publishes the seed, and skip-GC keeps it until the recompute.
A dropout with `fix_seed` (the default in ppdsl's programs, which always have a program seed: its seed is an
attribute) or with a seed tensor already replays the same mask without this.
"""

from __future__ import annotations

from collections.abc import Iterable

from ppdsl.runtime.skip_gc import write_again

SEED_ATTR = "ppdsl_rng_seed"  # marks the seed ops `seed_random_ops` inserts
SEED_PREFIX = "ppdsl.seed."
RANDOM_OPS = ("pd_op.dropout",)
SEED_HIGH = 2**31 - 1


def _draws_from_generator(op) -> bool:
    if op.name() not in RANDOM_OPS or op.op_role != 0:
        return False
    seed_tensor = op.operand_source(1)
    return not seed_tensor.initialized() and not op.attrs().get("fix_seed", False)


def seed_random_ops(main, stages: Iterable[int] | None = None) -> int:
    """Give each forward dropout of `stages` (all, for None) that draws from the generator a seed tensor from a
    `randint` op before it, marked `SEED_ATTR`; returns how many. Call it on the whole program, before the split,
    in every process alike (it shifts op positions, which name the values that cross programs)."""
    import paddle
    from paddle.base.framework import pir_chunk_id_guard, pir_op_role_guard

    wanted = None if stages is None else set(stages)
    block = main.global_block()
    found = [op for op in block.ops if _draws_from_generator(op) and (wanted is None or op.chunk_id in wanted)]
    for op in found:
        paddle.pir.set_insertion_point(op)
        with pir_op_role_guard(0), pir_chunk_id_guard(op.chunk_id):
            seed = paddle._C_ops.randint(0, SEED_HIGH, [1], paddle.int32, paddle.CPUPlace())
        seed.get_defining_op().set_bool_attr(SEED_ATTR, True)
        op.operand(1).set_source(seed)
    paddle.pir.set_insertion_point_to_block_end(block)
    return len(found)


def seed_name(stage: int, op_index: int) -> str:
    """Unique in a micro-batch's scope: two programs publishing one name erase each other's variable."""
    return f"{SEED_PREFIX}{stage}.{op_index}"


def publish_seeds(forward, stage: int) -> list[str]:
    """In the forward job program of `stage`, publish the result of every marked seed op by name (so a recompute
    reads it)."""
    import paddle

    names = []
    for i, op in enumerate(forward.global_block().ops):
        if op.has_attr(SEED_ATTR):
            name = seed_name(stage, i)
            paddle.pir.set_insertion_point_after(op)
            paddle._C_ops.set_persistable_value(op.result(0), name)
            names.append(name)
    paddle.pir.set_insertion_point_to_block_end(forward.global_block())
    return names


def recompute_program(forward, activations: Iterable[str]):
    """A clone of the (seed-published) forward job program that computes and publishes only `activations` (names
    it publishes); its marked seed ops read the forward's seeds by name instead of drawing again."""
    import paddle
    from paddle.base import core

    program = forward.clone()
    block = program.global_block()
    keep = set(activations)
    place = core.Place()
    place.set_place(paddle.CPUPlace())
    again = []  # (name, value): activations written back into the forward's variables
    for op in list(block.ops):
        if op.name() != "builtin.shadow_output":
            continue
        name, value = op.attrs()["output_name"], op.operand_source(0)
        producer = value.get_defining_op()
        if producer is not None and producer.has_attr(SEED_ATTR):
            # read the forward's seed instead of drawing a new one
            kwarg = block.add_kwarg(name, value.type())
            kwarg.place_attr = place
            op.erase()
            value.replace_all_uses_with(kwarg)
            producer.erase()
            continue
        op.erase()
        if name in keep:
            again.append((name, value))
    for name, value in again:
        write_again(program, name, value)
    _erase_dead_ops(block)
    return program


def _erase_dead_ops(block) -> None:
    """Erase ops no published value needs: last op first, until none is left whose results are all unused."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.ops)):
            if op.num_results() == 0:  # shadow_output, share_var: what the program is for
                continue
            if all(op.result(r).use_empty() for r in range(op.num_results())):
                op.erase()
                changed = True
