"""The `partition` statement: parsed, resolved into the IR once, printed by `ppdsl fmt`."""

from __future__ import annotations

import pytest

from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language import ast
from ppdsl.language.format import format_text
from ppdsl.language.parser import parse
from ppdsl.language.resolve import resolve_text

ORDER = "order { forward * microbatches backward * microbatches optimizer }\n"


def test_counts_and_layouts_parse_with_or_without_allow_empty():
    items = parse('partition = [9, 10, 9, 6]\npartition = "Et*3|t*4L" allow empty\n' + ORDER).items
    counts, layout = (i for i in items if isinstance(i, ast.Partition))
    assert (counts.counts, counts.layout, counts.allow_empty) == ((9, 10, 9, 6), None, False)
    assert (layout.counts, layout.layout, layout.allow_empty) == (None, "Et*3|t*4L", True)
    assert counts.span.line == 1 and layout.span.line == 2


def test_the_ir_holds_the_files_partition():
    defn = resolve_text("partition = [1, 0, 3] allow empty\n" + ORDER, "split.sched")
    assert defn.partition.counts == (1, 0, 3) and defn.partition.allow_empty
    assert resolve_text(ORDER, "plain.sched").partition is None


def test_a_partition_given_twice_in_one_file_is_e003():
    with pytest.raises(DiagnosticError) as err:
        resolve_text("partition = [1, 2]\npartition = [2, 1]\n" + ORDER, "twice.sched")
    assert [d.code for d in err.value.diagnostics] == ["E003"]


@pytest.mark.parametrize(
    "text", ["partition = []\n", "partition = [1, -2]\n", "partition = [1.5]\n", "partition 1, 2\n"]
)
def test_malformed_partitions_are_syntax_errors(text):
    with pytest.raises(DiagnosticError) as err:
        parse(text + ORDER)
    assert {d.code for d in err.value.diagnostics} == {"E001"}


def test_the_words_of_the_statement_stay_names_elsewhere():
    defn = resolve_text(
        "param empty = 2\nparam allow = 1\n" + ORDER.replace("microbatches backward", "empty backward"), "x"
    )
    assert set(defn.params) == {"empty", "allow"}


def test_fmt_prints_the_statement_in_its_one_layout():
    text = "partition=[ 5,0 ,5,4 ]   allow\n   empty\n" + ORDER
    assert format_text(text) == "partition = [5, 0, 5, 4] allow empty\n" + ORDER
    assert format_text('partition =  "Et*3|t*4L"\n' + ORDER) == 'partition = "Et*3|t*4L"\n' + ORDER
