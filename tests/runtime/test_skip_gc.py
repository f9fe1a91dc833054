"""Skip-GC: after each job, exactly the variables whose data a later job of the same micro-batch reads.

The small program is tests/models/user_mlp.py on two stages: stage s computes `t_s = tanh(h @ w_s)` from its input h
(`x` on stage 0, `t_0` on stage 1), stage 1 then `loss = mean((t_1 - y) ** 2)`. The schedule runs every forward,
then every backward_b, then every backward_w, so values wait for their readers across other jobs. Published values
are named here by the job program and op that computes them (`forward@0:tanh` is t_0).
"""

from __future__ import annotations

import importlib.util

import pytest

from ppdsl.analysis.expand import expand
from ppdsl.analysis.plan_spec import checked_spec
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load, resolve_text

from paths import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

SPLIT_LAST = "order { forward * microbatches backward_b * microbatches backward_w * microbatches optimizer }"


def _trainer(exp, model_spec=None, batch_size=None):
    from ppdsl.runtime.builtin_models import load_model
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig

    config = TrainConfig(batch_size=batch_size or 2 * exp.microbatches, optimizer="sgd")
    return PipelineTrainer(checked_spec(exp), load_model(model_spec), config)


def _labels(programs) -> dict[str, str]:
    """Published variable -> `<job program>:<op that computes it>`."""
    out = {}
    for name, program in programs.items():
        for op in program.global_block().ops:
            if op.name() == "builtin.shadow_output":
                producer = op.operand_source(0).get_defining_op().name().rpartition(".")[2]
                out[op.attrs()["output_name"]] = f"{name}:{producer}"
    return out


def _sets(built, m):
    from ppdsl.runtime.skip_gc import data_reads, skip_gc_sets, touched_values

    programs = built.programs
    jobs = [(t, int(mb)) for t, mb in (name.rsplit("#", 1) for name in built.job_names)]
    touched = {k: touched_values(p) for k, p in programs.items()}
    reads = {k: data_reads(p) for k, p in programs.items()}
    return jobs, skip_gc_sets(touched, reads, jobs, m)


def test_the_exact_skip_gc_sets_of_a_small_program(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    trainer = _trainer(expand(resolve_text(SPLIT_LAST), 2, 2), "tests.models.user_mlp:build")
    jobs, sets = _sets(trainer.built, 2)
    label = _labels(trainer.built.programs)
    got = {job: sorted(label.get(n, n) for n in names) for job, names in zip(jobs, sets, strict=True)}
    for mb in (0, 1):
        # x: for w_0's gradient (backward_w@0); t_0: stage 1's forward, stage 0's tanh_grad, w_1's gradient
        assert got[("forward@0", mb)] == ["forward@0:tanh", "x"]
        # not y: subtract_grad needs its shape only. The loss (mean) and the constants of pow and mean are read
        # by the backward's full_like / pow_grad / mean_grad, whose inputs Paddle does not mark shape-only
        assert got[("forward@1", mb)] == [
            "forward@0:tanh",
            "forward@1:full",
            "forward@1:full_int_array",
            "forward@1:mean",
            "forward@1:subtract",
            "forward@1:tanh",
        ]
        # the gradient at tanh's input (for backward_w@1) and at stage 1's input (for backward_b@0)
        assert got[("backward_b@1", mb)] == ["backward_b@1:matmul", "backward_b@1:tanh_grad"]
        # backward_b@0 reads t_0 (tanh_grad), and backward_w@1 still needs it: it must not free it
        assert got[("backward_b@0", mb)] == ["backward_b@0:tanh_grad", "forward@0:tanh"]
        assert got[("backward_w@0", mb)] == got[("backward_w@1", mb)] == []
    assert got[("optimizer@r0", 0)] == got[("optimizer@r1", 0)] == []
    # and the plan built with these sets trains
    from ppdsl.runtime.train import train

    assert len(train(trainer, 1).losses) == 1


@pytest.mark.parametrize(("stem", "pp", "m", "vpp"), [("fthenb", 2, 4, 1), ("1f1b", 2, 4, 1), ("vpp", 2, 4, 2)])
def test_no_more_than_paddle_where_paddle_is_right(stem, pp, m, vpp):
    """Without a split backward Paddle's own `set_skip_gc_vars` is right; ppdsl keeps a subset of it per job."""
    from paddle.distributed.passes.pass_utils import set_skip_gc_vars as paddles

    trainer = _trainer(expand(load(library_dir() / f"{stem}.sched"), pp, m, vpp))
    programs = trainer.built.programs
    jobs, ours = _sets(trainer.built, m)
    theirs = [_Recorder(t, mb) for t, mb in jobs]
    paddles(m, list(programs), list(programs.values()), theirs)
    assert all(a <= b.skip for a, b in zip(ours, theirs, strict=True))
    assert sum(map(len, ours)) > 0


def test_split_backward_keeps_what_paddle_frees_too_early():
    """ZB-V on the MLP: Paddle's verdict frees activations backward_w multiplies with; ppdsl keeps them, and trains."""
    from paddle.distributed.passes.pass_utils import set_skip_gc_vars as paddles

    from ppdsl.runtime.train import train

    m = 4
    trainer = _trainer(expand(load(library_dir() / "zbv.sched"), 2, m, 2), "tiny_mlp")
    programs = trainer.built.programs
    jobs, ours = _sets(trainer.built, m)
    theirs = [_Recorder(t, mb) for t, mb in jobs]
    paddles(m, list(programs), list(programs.values()), theirs)
    w_reads = set().union(*(set(p.global_block().kwargs()) for n, p in programs.items() if n.startswith("backward_w")))
    extra = set().union(*(a - b.skip for a, b in zip(ours, theirs, strict=True)))
    assert extra & w_reads
    assert len(train(trainer, 1).losses) == 1


class _Recorder:
    """Duck-typed `core.Job` that remembers its skip-GC set (the real one has no getter)."""

    def __init__(self, job_type: str, mb: int):
        self._type, self._mb, self.skip = job_type, mb, set()

    def type(self):
        return self._type

    def micro_batch_id(self):
        return self._mb

    def set_skip_gc_vars(self, names):
        self.skip = set(names)


def test_a_value_written_again_is_kept_only_until_its_rewrite():
    """Liveness with redefinition (memory jobs): the forward before a recompute keeps only what the recompute reads;
    an offload frees what it copied, its copy lives until the reload, which writes the original again."""
    from ppdsl.runtime.skip_gc import skip_gc_sets

    touched = {"F": {"in", "a", "b"}, "R": {"in", "a", "b"}, "B": {"a", "b"}, "O": {"a", "a@H"}, "L": {"a", "a@H"}}
    reads = {"F": {"in", "a"}, "R": {"in", "a"}, "B": {"a", "b"}, "O": {"a", "a@H"}, "L": {"a@H", "a"}}
    defines = {"F": {"a", "b"}, "R": {"a", "b"}, "B": set(), "O": {"a@H"}, "L": {"a"}}
    jobs = [("F", 0), ("R", 0), ("B", 0)]
    assert skip_gc_sets(touched, reads, jobs, 1, defines) == [{"in"}, {"a", "b"}, set()]
    assert skip_gc_sets(touched, reads, jobs, 1) == [{"in", "a", "b"}, {"a", "b"}, set()]  # without: all kept
    jobs = [("F", 0), ("O", 0), ("L", 0), ("B", 0)]
    assert skip_gc_sets(touched, reads, jobs, 1, defines) == [{"a", "b"}, {"a@H"}, {"a"}, set()]
