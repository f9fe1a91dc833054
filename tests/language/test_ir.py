"""The IR is data: a resolved schedule holds nothing executable and no AST, compares equal when built twice, and
pickles; its executable form (`runnable.compiled`) is made from it alone."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from ppdsl.language import ast
from ppdsl.language.ir import ScheduleDef
from ppdsl.language.library import library_files
from ppdsl.language.resolve import load, resolve_text
from ppdsl.language.runnable import compiled

from paths import ROOT

# the library, and the codegen fixtures with what the library lacks: functions, rules, tables, memory, parameters
SCHEDULES = [*library_files(), *(ROOT / "tests" / "codegen" / f"{stem}.sched" for stem in ("features", "functions"))]


def reachable(value: object):
    """Every value reachable from `value` through dataclass fields and containers, without recursion."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
            stack.extend(vars(item).values())  # anything set outside the fields too
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)


@pytest.mark.parametrize("path", SCHEDULES, ids=lambda p: p.stem)
def test_a_resolved_schedule_is_data_without_code_or_ast(path):
    defn = load(path)
    for item in reachable(defn):
        assert not callable(item), f"{type(item).__name__} is callable"
        assert type(item).__module__ != ast.__name__, f"an AST node is reachable: {type(item).__name__}"
        if dataclasses.is_dataclass(item):
            assert type(item).__dataclass_params__.frozen, f"{type(item).__name__} is not frozen"
        assert not isinstance(item, (list, set)), f"a mutable {type(item).__name__} in the IR"


@pytest.mark.parametrize("path", SCHEDULES, ids=lambda p: p.stem)
def test_a_schedule_built_twice_is_equal_and_pickles(path):
    first, second = load(path), load(path)
    assert first == second and first is not second
    again = pickle.loads(pickle.dumps(first))
    assert again == first
    assert compiled(again).order_source == compiled(first).order_source  # the same code, made from the data


def test_the_compiled_form_lives_as_long_as_its_schedule():
    defn = resolve_text("order { forward backward optimizer }", "x.sched")
    assert compiled(defn) is compiled(defn)
    assert isinstance(defn, ScheduleDef) and compiled(defn).order is not None
