from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`ppdsl plot --measured PROFILE` draws a profile's jobs over a schedule's memory and title: the profile "
    "must be a run of that schedule at those sizes. A profile from `ppdsl trace` or `ppdsl run --profile` says "
    "what it measured (its `otherData`); the plot takes the schedule and sizes from there when they are left out, "
    "and refuses other ones, or jobs that are not the schedule's.",
    cmd(
        "ppdsl trace 1f1b --pp 4 -m 8 -o profile.json",
        "ppdsl plot zbv --pp 2 -m 4 --vpp 2 --measured profile.json -o timeline.png",
    ),
    cmd("ppdsl trace 1f1b --pp 4 -m 8 -o profile.json", "ppdsl plot --measured profile.json -o timeline.png"),
)
