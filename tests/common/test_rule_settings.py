"""A rule sets only where and when an op runs: an attribute that changes what it computes, a type Paddle does not
take, or an unbounded stream template is a located error of `check` (E055-E057), not a crash or another model."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.common.rule_settings import MAX_FORMAT_WIDTH, MAX_STREAM_NAME, RULE_ATTRIBUTES
from ppdsl.language.resolve import load, resolve_text

from paths import LIBRARY

GPIPE = "order { forward * microbatches backward * microbatches optimizer }\n"


def rule_errors(items: str) -> list[tuple[str, str, int, int]]:
    src = f'schedule "r"\nrule "pd_op.*" {{ priority = 1 {items} }}\n' + GPIPE
    with pytest.raises(DiagnosticError) as err:
        resolve_text(src, "r.sched")
    return [(d.code, d.message, d.span.line, d.span.col) for d in err.value.diagnostics]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ("attr axis = 1", "a rule cannot set `axis`: it is not a stream, scheduling or communication attribute"),
        ("attr axis = true", "a rule cannot set `axis`: it is not a stream, scheduling or communication attribute"),
        (
            "attr approximate = true",
            "a rule cannot set `approximate`: it is not a stream, scheduling or communication attribute",
        ),
        ("attr ring_id = 3", "a rule cannot set `ring_id`: it is not a stream, scheduling or communication attribute"),
        ("attr scheduling_priority = 2", "`scheduling_priority` is set by the rule's `priority = ...`"),
        ('attr execution_stream = "s"', '`execution_stream` is set by the rule\'s `stream = "..."`'),
    ],
)
def test_an_attribute_that_is_not_a_scheduling_one_is_refused_where_it_is_written(items, message):
    [(code, got, line, col)] = rule_errors(items)
    assert (code, got, line, col) == ("E055", message, 2, 31)


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ("attr use_calc_stream = 1", "`use_calc_stream` takes `true` or `false`, not the integer `1`"),
        ("attr dynamic_shape = 0.5", "`dynamic_shape` takes `true` or `false`, not the real number `0.5`"),
        ('attr force_record_event = "yes"', '`force_record_event` takes `true` or `false`, not the string "yes"'),
        ("attr event_to_record = true", '`event_to_record` takes a string "...", not `true`'),
    ],
)
def test_an_allowed_attribute_of_the_wrong_type_is_refused(items, message):
    assert rule_errors(items) == [("E056", message, 2, 31)]


def test_every_attribute_error_of_a_rule_is_reported_at_its_own_item():
    items = "attr use_calc_stream = true attr axis = 1 attr dynamic_shape = 2"
    at = {name: 31 + items.index(f"attr {name}") for name in ("axis", "dynamic_shape")}
    errors = rule_errors(items)
    assert [(code, col) for code, _, _, col in errors] == [("E055", at["axis"]), ("E056", at["dynamic_shape"])]


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        ("s{op_role:>3000000000}", f"the width of `op_role` is 3000000000, more than {MAX_FORMAT_WIDTH}"),
        ("s{op_role:.99}", f"the precision of `op_role` is 99, more than {MAX_FORMAT_WIDTH}"),
        ("s{ring_id.__class__}", "`{ring_id.__class__}` is not an op attribute's name"),
        ("s{ring_id[0]}", "`{ring_id[0]}` is not an op attribute's name"),
        ("s{ring_id!r}", "`{ring_id!r}` is not an op attribute's name"),
        ("s{ring_id:{op_role}}", "`{ring_id:{op_role}}` has a format this template cannot use"),
        ("s{ring_id", "its braces do not pair up"),
        ("s}", "its braces do not pair up"),
        (
            "x" * (MAX_STREAM_NAME + 1),
            f"the name is {MAX_STREAM_NAME + 1} characters long, more than {MAX_STREAM_NAME}",
        ),
        ("x" * 100 + "{ring_id:>30}", f"the name is 130 characters long, more than {MAX_STREAM_NAME}"),
    ],
)
def test_a_stream_template_is_bounded(stream, message):
    [(code, got, line, col)] = rule_errors(f'stream = "{stream}"')
    assert (code, got, line, col) == ("E057", f"stream `{stream}`: {message}", 2, 31)


@pytest.mark.parametrize("stream", ["send_stream_{ring_id}", "s{ring_id:>4}_{op_role:03d}", "{{literal}}"])
def test_bounded_templates_pass(stream):
    defn = resolve_text(f'rule "pd_op.send_v2" {{ stream = "{stream}" }}\n' + GPIPE)
    assert defn.rules[0].stream == stream


def test_the_allowed_attributes_with_their_types_pass():
    example = {bool: "true", int: "3", str: '"e"'}
    items = " ".join(f"attr {name} = {example[a.kind]}" for name, a in RULE_ATTRIBUTES.items())
    defn = resolve_text(f'rule "pd_op.send_v2" {{ {items} }}\n' + GPIPE)
    assert [name for name, _ in defn.rules[0].attrs] == list(RULE_ATTRIBUTES)


def test_the_library_schedules_rules_pass():
    for path in sorted(LIBRARY.glob("*.sched")):
        load(path)  # 1f1b and vpp set use_calc_stream and dynamic_shape as Paddle's pass does


def test_check_exits_2_with_the_allowed_ones_in_help(tmp_path):
    path = tmp_path / "softmax.sched"
    path.write_text('rule "pd_op.softmax" { attr axis = 1 }\n' + GPIPE)
    result = CliRunner().invoke(app, ["check", str(path), "--pp", "2", "-m", "2"])
    assert result.exit_code == 2
    assert "error[E055]" in result.output
    assert all(f"`{name}`" in result.output for name in RULE_ATTRIBUTES)
