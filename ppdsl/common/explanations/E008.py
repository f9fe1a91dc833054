from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A cost file (`--costs FILE`, as `ppdsl calibrate` writes it) is not a JSON object of the expected form "
    '`{"costs": {type: time}, "stages": {stage: {type: time}}, "latency": t, "bandwidth": b, "unit": "s"}`: '
    "a key it does not know (a typo, or a profile or summary passed as a cost file), a job type the schedule "
    "does not have, a time that is not a number from 0 to 1e15 (`NaN`, `Infinity`, negative, a string), or a "
    "time unit other than `s`, `ms` and `us`. Nothing runs with the schedule's own costs instead.",
    cmd("ppdsl check 1f1b --pp 4 -m 8 --costs costs.json", files=(("costs.json", '{"costs": {"forward": 1,}}\n'),)),
    cmd("ppdsl check 1f1b --pp 4 -m 8 --costs costs.json", files=(("costs.json", '{"costs": {"forward": 1}}\n'),)),
)
