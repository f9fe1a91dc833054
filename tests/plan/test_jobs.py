"""A job's one identity (`ppdsl.plan.jobs`): tokens and packed codes round-trip, and every helper of the
codec agrees with `pack` (the one formula), including the source the order compiler emits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdsl.plan.jobs import (
    Job,
    JobCodec,
    ProgramKey,
    job_label,
    paddle_job_name,
    program_key,
    program_key_of,
    program_name,
)
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD, OPTIMIZER

PROPERTY = settings(max_examples=300, deadline=None, derandomize=True)

jobs = st.builds(Job, st.integers(0, 12), st.integers(0, 10**4), st.integers(0, 10**6))


@st.composite
def coded(draw):
    """A codec and a (type, chunk, micro-batch) it can pack."""
    codec = JobCodec(draw(st.integers(5, 12)), draw(st.integers(1, 8)))
    t = draw(st.integers(0, codec.ntypes - 1))
    return codec, t, draw(st.integers(0, codec.vpp - 1)), draw(st.integers(0, 10**5))


@PROPERTY
@given(jobs)
def test_token_round_trips(job):
    assert Job.parse(str(job)) == job


@PROPERTY
@given(st.integers(0, 999), st.sampled_from("FBIW"), st.integers(0, 999))
def test_torch_tokens_parse_and_print_back(stage, letter, mb):
    token = f"{stage}{letter}{mb}"
    job = Job.parse(token)
    assert str(job) == token and job.letter == letter and (job.stage, job.mb) == (stage, mb)


def test_tokens_name_the_builtin_types_as_pytorch_does():
    assert [str(Job(t, 1, 0)) for t in (FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W)] == ["1F0", "1B0", "1I0", "1W0"]
    assert str(Job(OPTIMIZER, 0, 0)) == "0[4]0"  # no letter: by its index
    assert Job(FORWARD, 2, 3) == (FORWARD, 2, 3)  # a plain tuple is the same job (hot loops build tuples)


@pytest.mark.parametrize("token", ["", "F0", "1F", "1X0", "1UNSHARD", "-1F0", "1F0 ", "1[a]0", "1f0", "1F0\n"])
def test_bad_tokens_are_refused(token):
    with pytest.raises(ValueError):
        Job.parse(token)


@PROPERTY
@given(coded())
def test_codes_round_trip(case):
    codec, t, chunk, mb = case
    code = codec.pack(t, chunk, mb)
    assert codec.unpack(code) == (t, chunk, mb)
    assert (codec.type_of(code), codec.chunk_of(code), codec.microbatch_of(code)) == (t, chunk, mb)
    assert codec.base(chunk, mb) + t == code
    assert code == mb * codec.stride + codec.slot(t, chunk)
    assert codec.types_of([code]) == [t] and codec.chunks_of([code]) == [chunk] and codec.types_in([code]) == {t}
    assert (code < codec.size(mb + 1)) and (code >= codec.size(mb))
    table = list(range(codec.size(mb + 1)))
    assert code in table[codec.type_slice(t)]


@PROPERTY
@given(coded())
def test_the_compiled_orders_pack_as_the_codec(case):
    codec, t, chunk, mb = case
    for chunk_src in ("0", "_c") if chunk == 0 else ("_c",):
        source = JobCodec.pack_source(t, chunk_src, "_k", "_V", "_T")
        assert eval(source, {"_k": mb, "_V": codec.vpp, "_T": codec.ntypes, "_c": chunk}) == codec.pack(t, chunk, mb)


def test_codes_are_dense_and_distinct():
    codec = JobCodec(6, 3)
    codes = [codec.pack(t, c, mb) for mb in range(4) for c in range(3) for t in range(6)]
    assert sorted(codes) == list(range(codec.size(4)))
    assert [s for s, _, _ in codec.slots()] == list(range(codec.stride))


# ---------------------------------------------------------------------- a job's program, Paddle name and label

type_names = st.sampled_from(["forward", "backward", "backward_b", "backward_w", "optimizer", "recv_forward", "x2"])


@PROPERTY
@given(type_names, st.integers(0, 10**4))
def test_a_program_name_reads_back_as_its_key(name, where):
    key = ProgramKey(name, where)
    assert program_key_of(program_name(key)) == key


def test_program_names_are_a_type_on_a_stage_and_the_optimizer_on_a_rank():
    stage_of = [[0, 3], [1, 2]]  # two ranks, two chunks each (a V placement)
    assert program_key("forward", 1, 1, stage_of) == ProgramKey("forward", 2)
    assert program_name(program_key("forward", 1, 1, stage_of)) == "forward@2"
    optimizer = program_key("optimizer", 1, 1, stage_of)
    assert optimizer == ProgramKey("optimizer", 1) and optimizer.per_rank
    assert program_name(optimizer) == "optimizer@r1"


@pytest.mark.parametrize("name", ["forward", "forward@", "forward@r2", "optimizer@2", "@3", "forward@2-5", "f@-1"])
def test_a_name_no_program_has_reads_as_none(name):
    """A stage's type with a rank, the optimizer with a stage, or not a program name at all."""
    assert program_key_of(name) is None


def test_paddle_names_a_ranks_jobs_by_chunk_only_with_several_chunks():
    assert paddle_job_name("forward", 0, 1) == "forward"
    assert [paddle_job_name("backward_w", c, 3) for c in range(3)] == ["backward_w0", "backward_w1", "backward_w2"]
    assert paddle_job_name("optimizer", 0, 2) == "optimizer"


def test_labels_are_the_short_name_the_micro_batch_and_with_chunks_the_chunk():
    assert job_label("forward", "F", 0, 3, 1) == "F3"
    assert job_label("backward", "B", 1, 0, 2) == "B0.c1"
    assert job_label("recv_forward", "recv_forward", 0, 2, 1) == "recv_forward2"
    assert job_label("optimizer", "optimizer", 1, 0, 2, once_a_step=True) == "optimizer"
