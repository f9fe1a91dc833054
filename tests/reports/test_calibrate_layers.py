"""`ppdsl calibrate --layers`: a profile's per-stage job times and activation bytes divided over each stage's
layers, in the layer-profile form `--layers FILE` reads."""

from __future__ import annotations

import json

import pytest

from ppdsl.analysis.layers import profile_from_text
from ppdsl.analysis.records import JobRecord
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.reports.calibrate import calibrate, layer_profile
from ppdsl.reports.trace import Profile


def _profile(meta: dict) -> Profile:
    # stage 0: forward 2 ms, backward 4 ms (one whole backward); stage 1: forward 9, backward_b 6, backward_w 3
    timed = [("forward", 0, 0.0, 0.002), ("backward", 0, 0.01, 0.014), ("forward", 1, 0.002, 0.011)]
    timed += [("backward_b", 1, 0.011, 0.017), ("backward_w", 1, 0.017, 0.020)]
    jobs = [JobRecord(s, k, t, 0, 0, s, t, start, end) for k, (t, s, start, end) in enumerate(timed)]
    return Profile(jobs, 1e6, meta)


def test_each_stage_is_divided_over_its_layers():
    measured = _profile({"layers_per_stage": [1, 3], "activation_bytes_per_stage": [100, 900]})
    written = layer_profile(measured, calibrate(measured))
    profile = profile_from_text(json.dumps(written))
    assert profile.kinds == "ETTL"
    first, *rest = profile.layers
    assert (first.forward, first.backward_b, first.backward_w, first.held) == pytest.approx((2.0, 4.0, 0.0, 100))
    for layer in rest:
        assert (layer.forward, layer.backward_b, layer.backward_w, layer.held) == pytest.approx((3.0, 2.0, 1.0, 300))


def test_a_profile_without_the_placement_is_a_diagnostic():
    measured = _profile({})
    with pytest.raises(DiagnosticError) as err:
        layer_profile(measured, calibrate(measured))
    assert [d.code for d in err.value.diagnostics] == ["E009"] and "layers_per_stage" in err.value.diagnostics[
        0
    ].message
