"""The plan specification: built once from a check, plain data that round-trips through JSON, refused when damaged
(E091) or of another source (E090), and importable without the language (a rank process imports it)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys

import pytest

from ppdsl.analysis.check import check
from ppdsl.analysis.plan_spec import plan_spec
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.plan.spec import FORMAT, PlanSpec, source_fingerprint

from paths import LIBRARY, ROOT

RULES_AND_TYPES = """
schedule "Mine"
param lag = 1
job recv_forward : forward ops "pd_op.recv_v2" before forward receives
rule "pd_op.send_v2" in forward { stream = "send_stream_{ring_id}" priority = pp - lag attr use_calc_stream = true }
order {
    repeat microbatches { recv_forward forward }
    backward * microbatches
    optimizer
}
"""


def _checked(schedule, pp, m, vpp=1, params=None):
    return check(Scenario(schedule, pp, m, vpp, params), record_visits=True)


@pytest.mark.parametrize(("stem", "pp", "m", "vpp"), [("1f1b", 4, 8, 1), ("zbv", 2, 4, 2), ("vpp", 2, 4, 2)])
def test_the_spec_holds_the_checked_orders_placement_and_merged_order(stem, pp, m, vpp):
    result = _checked(LIBRARY / f"{stem}.sched", pp, m, vpp)
    exp, spec = result.expansion, plan_spec(result)
    assert (spec.pp, spec.vpp, spec.microbatches, spec.schedule) == (pp, vpp, m, exp.defn.name)
    assert [list(row) for row in spec.stage_of] == exp.stage_of
    assert [list(order) for order in spec.orders] == [list(map(exp.decode, jobs)) for jobs in exp.jobs]
    assert [spec.job_tuples(r) for r in range(pp)] == [exp.job_tuples(r) for r in range(pp)]
    assert list(spec.merged) == result.execution.merged_order()  # recorded by the check, not executed again
    assert spec.type_names == exp.type_names
    assert [spec.label(job) for job in spec.orders[0]] == [exp.label(code) for code in exp.jobs[0]]
    assert spec.rank_of_stage() == exp.rank_of_stage()


def test_a_spec_round_trips_through_json_with_its_rules_job_types_and_parameters(tmp_path):
    path = tmp_path / "mine.sched"
    path.write_text(RULES_AND_TYPES)
    spec = plan_spec(_checked(path, 3, 4, params={"lag": 2}))
    again = PlanSpec.from_json(spec.to_json())
    assert again == spec
    assert spec.parameters == {"lag": 2}
    recv = spec.job_types[spec.type_names.index("recv_forward")]
    assert (recv.region, recv.ops, recv.before, recv.receives, recv.builtin) == (
        "forward",
        ("pd_op.recv_v2",),
        "forward",
        True,
        False,
    )
    assert spec.rule_dicts() == [
        {
            "pattern": "pd_op.send_v2",
            "job": "forward",
            "stream": "send_stream_{ring_id}",
            "priority": 1,  # pp - lag, evaluated at these sizes
            "attrs": {"use_calc_stream": True},
        }
    ]
    assert json.loads(spec.to_json())["format"] == FORMAT
    assert all(jt.memory is None and jt.fraction is None for jt in spec.job_types)


def test_the_spec_says_what_each_memory_action_does_and_its_fraction(tmp_path):
    """The runtime builds a memory action's program from `memory` and `fraction`, never from the type's name."""
    path = tmp_path / "partial.sched"
    path.write_text("memory offload fraction = 0.25\n" + (LIBRARY / "1f1b_recompute.sched").read_text())
    spec = plan_spec(_checked(path, 2, 4))
    actions = {jt.name: (jt.memory, jt.fraction) for jt in spec.job_types if jt.memory is not None}
    assert actions == {"recompute": ("recompute", None), "offload": ("offload", 0.25), "reload": ("reload", 0.25)}
    assert PlanSpec.from_json(spec.to_json()) == spec
    order = {jt.name: jt.program_order for jt in spec.job_types}  # a stage's programs in the order they run
    assert order["forward"] < order["offload"] < order["recompute"] < order["reload"] < order["backward"]


def test_the_fingerprint_is_the_sha256_of_the_text_and_its_includes_in_order(tmp_path):
    (tmp_path / "costs.sched").write_text("cost backward = 2\n")
    root = 'include "costs.sched"\n' + "order { forward * microbatches backward * microbatches optimizer }\n"
    (tmp_path / "root.sched").write_text(root)
    spec = plan_spec(_checked(tmp_path / "root.sched", 2, 2))
    want = hashlib.sha256(root.encode() + b"\0" + b"cost backward = 2\n" + b"\0").hexdigest()
    assert spec.fingerprint == want == source_fingerprint([root, "cost backward = 2\n"])
    assert source_fingerprint(["a", "b"]) != source_fingerprint(["ab", ""])  # text moved between files


def test_a_spec_needs_a_check_that_recorded_its_merged_order():
    with pytest.raises(ValueError, match="record_visits"):
        plan_spec(check(Scenario("1f1b", 2, 4)))
    with pytest.raises(ValueError, match="completed"):
        plan_spec(check(Scenario("1f1b", 4, 2), record_visits=True))  # `require microbatches >= pp` fails


def _damaged(change) -> str:
    data = json.loads(plan_spec(_checked("1f1b", 2, 4)).to_json())
    change(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "expecting property name"),
        ("[1, 2]", "not a JSON object"),
        (_damaged(lambda d: d.update(format=1)), "format is `1`"),
        (_damaged(lambda d: d.pop("fingerprint")), "`fingerprint` is missing"),
        (_damaged(lambda d: d.update(pp=True)), "`pp` is not an integer"),
        (_damaged(lambda d: d["orders"][1].append([0, 0, 9])), "rank 1's order holds `[0, 0, 9]`"),
        (_damaged(lambda d: d["stage_of"][0].__setitem__(0, 1)), "does not place every stage once"),
        (_damaged(lambda d: d["merged"].pop()), "`merged` does not hold every job"),
        (_damaged(lambda d: d["job_types"][0].update(ops="*")), "job type 0: `ops` is not a list"),
        (_damaged(lambda d: d["job_types"][0].update(memory="swap")), "job type 0: `memory` is `swap`, not one of"),
        (_damaged(lambda d: d["job_types"][0].update(fraction=1.5)), "job type 0: `fraction` is 1.5, not in (0, 1]"),
    ],
)
def test_a_damaged_plan_is_refused_naming_what_is_wrong(text, fragment):
    with pytest.raises(DiagnosticError) as err:
        PlanSpec.from_json(text, "`plan.json`")
    (d,) = err.value.diagnostics
    assert d.code == "E091" and d.message.startswith("`plan.json` is not a ppdsl plan specification: ")
    assert fragment in d.message, d.message


def test_a_plan_of_another_source_is_refused_naming_both_fingerprints():
    spec = plan_spec(_checked("1f1b", 2, 4))
    spec.require_fingerprint(spec.fingerprint, "the source", "fix")  # its own: accepted
    other = source_fingerprint(["order { forward backward optimizer }"])
    with pytest.raises(DiagnosticError) as err:
        spec.require_fingerprint(other, "`mine.sched`", "check it again")
    (d,) = err.value.diagnostics
    assert d.code == "E090" and d.help == "check it again"
    assert spec.fingerprint[:16] in d.message and other[:16] in d.message and "`mine.sched`" in d.message


def test_a_spec_is_frozen():
    spec = plan_spec(_checked("1f1b", 2, 4))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.pp = 3


def test_reading_a_spec_imports_nothing_of_the_language():
    """A rank process reads its plan through `ppdsl.plan`: it must bring in neither the language nor the analysis."""
    code = (
        "import sys\n"
        "from ppdsl.plan.spec import PlanSpec\n"
        "spec = PlanSpec.from_json(sys.stdin.read())\n"
        "print(spec.label(spec.orders[0][0]), sorted(m for m in sys.modules if m.startswith(('ppdsl.language', 'ppdsl.analysis'))))\n"
    )
    text = plan_spec(_checked("1f1b", 2, 4)).to_json()
    out = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    assert out.split() == ["recv_forward0", "[]"]
