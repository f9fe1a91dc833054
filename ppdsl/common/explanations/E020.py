from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`ppdsl import` reads PyTorch pipelining's compute-only CSV: one row per rank, one action per step "
    "(`<stage><F|B|I|W><micro-batch>`, an empty field for an idle step), each stage on one rank only.",
    cmd("ppdsl import schedule.csv -o imported.sched", files=(("schedule.csv", "0F0,0X0\n1F0,1B0\n"),)),
    cmd("ppdsl import schedule.csv -o imported.sched", files=(("schedule.csv", "0F0,0B0\n1F0,1B0\n"),)),
)
