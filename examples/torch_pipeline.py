"""Train with a ppdsl schedule in PyTorch's own pipelining runtime (torch.distributed.pipelining).

    ppdsl expand zbv --pp 2 -m 4 --vpp 2 --format torch-csv -o zbv.csv     # prints each rank's stages
    torchrun --nproc-per-node 2 examples/torch_pipeline.py zbv.csv --microbatches 4

`ppdsl expand --format torch-csv` writes PyTorch's compute-only CSV: one row per rank, one action per cell
(`0F1`: stage 0, forward, micro-batch 1; `I` / `W` are the two halves of a split backward). torch's
`_PipelineScheduleRuntime._load_csv` reads it and adds the sends and receives. What torch needs from you is one
`PipelineStage` for each stage the rank's row names, in that order of stage index: rank 0 of ZB-V (a V
placement) holds stages 0 and 3, rank 0 of interleaved 1F1B (looped) stages 0 and 2. A rank that builds other
stages than its row names makes torch fail (a shape mismatch, or a huge allocation), so `stages_of_rank` reads
them from the file.

The model here is a stack of `Linear + tanh` blocks, one per stage, trained with SGD on a mean squared error;
`reference_parameters` trains the same stack without a pipeline, which the pipelined run must equal.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

HIDDEN = 8
BATCH = 8
LR = 0.1
_STAGE = re.compile(r"(\d+)[FBIW]\d+")


def stages_of_rank(csv_path: str | Path, rank: int) -> list[int]:
    """The global stages a rank's row of a compute-only CSV names, ascending (its `PipelineStage`s)."""
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    return sorted({int(m.group(1)) for cell in rows[rank] for m in _STAGE.finditer(cell)})


def num_stages(csv_path: str | Path) -> int:
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    return 1 + max(int(m.group(1)) for row in rows for cell in row for m in _STAGE.finditer(cell))


def block(stage: int) -> nn.Module:
    """Stage `stage` of the model, initialised from the stage number alone: every process builds the same."""
    generator = torch.Generator().manual_seed(1000 + stage)
    layer = nn.Linear(HIDDEN, HIDDEN)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(HIDDEN, HIDDEN, generator=generator) * 0.5)
        layer.bias.copy_(torch.randn(HIDDEN, generator=generator) * 0.1)
    return nn.Sequential(layer, nn.Tanh())


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(step)
    x = torch.randn(BATCH, HIDDEN, generator=generator)
    return x, torch.sin(x)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((output - target) ** 2).mean()


def train_pipelined(csv_path: str | Path, microbatches: int, steps: int) -> dict[int, dict[str, torch.Tensor]]:
    """This rank's stages trained `steps` steps with the CSV's schedule in torch's runtime (the process group must
    be initialised); stage -> its parameters."""
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    rank, total = dist.get_rank(), num_stages(csv_path)
    mine = stages_of_rank(csv_path, rank)
    modules = {s: block(s) for s in mine}
    stages = [PipelineStage(modules[s], s, total, torch.device("cpu")) for s in mine]
    schedule = _PipelineScheduleRuntime(stages, microbatches, loss_fn=loss_fn)
    schedule._load_csv(str(csv_path))
    optimizer = torch.optim.SGD([p for m in modules.values() for p in m.parameters()], lr=LR)
    for step in range(steps):
        optimizer.zero_grad()
        x, y = batch(step)
        args = (x,) if 0 in mine else ()
        target = y if total - 1 in mine else None
        schedule.step(*args, target=target, losses=[] if target is not None else None)
        optimizer.step()
    return {s: {n: p.detach().clone() for n, p in m.named_parameters()} for s, m in modules.items()}


def reference_parameters(total: int, steps: int) -> dict[int, dict[str, torch.Tensor]]:
    """The same model and data without a pipeline: the whole batch through every stage, one SGD step a batch."""
    modules = [block(s) for s in range(total)]
    model = nn.Sequential(*modules)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(steps):
        optimizer.zero_grad()
        x, y = batch(step)
        loss_fn(model(x), y).backward()
        optimizer.step()
    return {s: {n: p.detach().clone() for n, p in m.named_parameters()} for s, m in enumerate(modules)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("csv", help="`ppdsl expand ... --format torch-csv` output")
    parser.add_argument("--microbatches", "-m", type=int, required=True)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    try:
        trained = train_pipelined(args.csv, args.microbatches, args.steps)
        want = reference_parameters(num_stages(args.csv), args.steps)
        worst = max((trained[s][n] - want[s][n]).abs().max().item() for s in trained for n in trained[s])
        print(f"rank {dist.get_rank()}: stages {sorted(trained)}, largest difference from no pipeline {worst:.2e}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
