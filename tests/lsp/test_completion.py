"""Completion offers what fits where the cursor is (issue 30), in process; tests/lsp/test_features.py asks the
server over stdio. Before, every position got one flat list of about 60 names, without `keeps` or `moves`."""

from __future__ import annotations

import textwrap

import pytest

from ppdsl.lsp import features
from ppdsl.lsp.checking import check_text
from ppdsl.lsp.convert import Units
from ppdsl.lsp.features import Document
from ppdsl.lsp.sizes import Sizes
from ppdsl.lsp.symbols import build_index
from ppdsl.plan.kinds import KINDS

TEXT = textwrap.dedent(
    """\
    schedule "mine"
    job send_it (SI) : forward ops "pd_op.send_v2" after forward sends
    memory recompute keeps 0.2
    memory forward allocates 1
    cost forward = 1
    comm latency = 0.1
    rule "pd_op.matmul" in backward {
        priority = 1
    }
    order {
        repeat microbatches { forward send_it }
        backward * microbatches
        optimizer
    }
    """
)
# the built-in kinds in the table's order (the language lists them so): the five, the memory actions, the collectives
BUILTIN_ORDER = list(KINDS)
assert BUILTIN_ORDER[:8] == [
    "forward",
    "backward",
    "backward_b",
    "backward_w",
    "optimizer",
    "recompute",
    "offload",
    "reload",
]


def _labels(text: str, needle: str, typed: str = "") -> list[str]:
    """The labels offered with the cursor right after `needle` (its first occurrence), `typed` typed there, in
    the order their `sort_text` gives."""
    start = text.index(needle) + len(needle)
    text = text[:start] + typed + text[start:]
    index = build_index("mine.sched", text, lambda p: None)
    doc = Document("mine.sched", text, check_text(text, "mine.sched", Sizes()), index, Units("utf-16"), [])
    line = text.count("\n", 0, start) + 1
    col = start + len(typed) - (text.rfind("\n", 0, start) + 1) + 1
    items = features.completions(doc, line, col)
    assert all(item.sort_text for item in items)
    return [item.label for item in sorted(items, key=lambda item: item.sort_text)]


@pytest.mark.parametrize(
    "subject, verbs",
    [
        ("recompute", ["keeps", "fraction"]),
        ("offload", ["moves", "fraction"]),
        ("reload", []),
        ("forward", ["allocates", "frees"]),
        ("send_it", ["allocates", "frees"]),
        ("host", ["limit"]),
    ],
)
def test_after_memory_and_a_job_type_come_the_verbs_it_takes(subject, verbs):
    assert _labels(TEXT, "memory ", f"{subject} ") == verbs
    assert _labels(TEXT, "memory ", f"{subject} {verbs[0][:2]}" if verbs else f"{subject} ") == verbs  # half typed


def test_after_memory_come_the_job_types_in_their_order_then_limit_and_host():
    assert _labels(TEXT, "memory ") == [*BUILTIN_ORDER, "send_it", "limit", "host"]


@pytest.mark.parametrize("needle", ["cost ", "in ", "after "])
def test_where_a_job_type_goes_the_job_types_come_in_order(needle):
    assert _labels(TEXT, needle) == [*BUILTIN_ORDER, "send_it"]


def test_inside_a_rule_come_its_keys():
    assert _labels(TEXT, "    priority = 1\n") == ["stream", "priority", "attr"]
    assert _labels(TEXT, "{\n    ", "pri") == ["stream", "priority", "attr"]


def test_after_comm_come_its_keys():
    assert _labels(TEXT, "comm ") == ["latency", "bandwidth", "offload"]
    assert _labels(TEXT, "comm ", "offload ") == ["bandwidth", "latency", "duplex"]


def test_in_an_order_everything_that_can_be_written_there_job_types_first_in_order():
    labels = _labels(TEXT, "    backward * ")
    assert labels[: len(BUILTIN_ORDER) + 1] == [*BUILTIN_ORDER, "send_it"]
    assert {"repeat", "let", "microbatches", "ceildiv"} <= set(labels)
    assert "keeps" not in labels and "stream" not in labels
    assert _labels(TEXT, "order {\n") == labels  # outside any rule block: the whole list


def test_no_position_and_a_position_past_the_end_give_the_whole_list():
    index = build_index("mine.sched", TEXT, lambda p: None)
    doc = Document("mine.sched", TEXT, check_text(TEXT, "mine.sched", Sizes()), index, Units("utf-16"), [])
    whole = [item.label for item in features.completions(doc)]
    assert [item.label for item in features.completions(doc, 999, 1)] == whole
    assert "keeps" not in whole and whole[0] == "forward"
