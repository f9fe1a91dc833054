"""Train a small model with Paddle's auto-parallel engine (`dist.to_static`), once per schedule mode; print JSON.

    python tests/auto_parallel_run.py STEPS MODE[@vpp=V] ...     # e.g. 3 1F1B ppdsl:1f1b path/to/x.sched

One process, one CPU, pp_degree 1, accumulate_steps 2: the engine still runs its whole pipeline path (gradient
merge, dist2dense, `pipeline_pass`, a `core.Plan` on the standalone executor), so a mode that reaches ppdsl's
pass trains through exactly the code a multi-rank job runs on each rank. Run in a subprocess by
tests/test_paddle_pass.py: the engine sets process-wide executor flags and leaves a distributed context behind.
For each mode: the loss of each micro-batch per step, the plan's job list, the ops of each job program, and the
parameters after training; or, if it fails, {"error": "<type>: <message>"}.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

os.environ.setdefault("GLOG_minloglevel", "2")
warnings.simplefilter("ignore")

import numpy as np  # noqa: E402
import paddle  # noqa: E402
import paddle.distributed as dist  # noqa: E402
from paddle.io import DataLoader, Dataset  # noqa: E402

from ppdsl.runtime.paddle_pass import install  # noqa: E402

MICROBATCHES = 2
BATCH = 4


class _Data(Dataset):
    # [batch, sequence, hidden]: 3-D activations, so a schedule with backward_w can split the matmul gradients
    def __init__(self, n: int = 32):
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, 3, 8)).astype("float32")
        self.y = rng.standard_normal((n, 3, 8)).astype("float32")

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self) -> int:
        return len(self.x)


class _MLP(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.l1 = paddle.nn.Linear(8, 8)
        self.l2 = paddle.nn.Linear(8, 8)

    def forward(self, x):
        return self.l2(paddle.tanh(self.l1(x)))


def train(mode: str, steps: int, vpp: int = 1) -> dict:
    paddle.seed(0)
    model = _MLP()
    mesh = dist.ProcessMesh([0], dim_names=["x"])
    loader = dist.shard_dataloader(DataLoader(_Data(), batch_size=BATCH), meshes=[mesh])
    strategy = dist.Strategy()
    strategy.pipeline.enable = True
    strategy.pipeline.schedule_mode = mode
    strategy.pipeline.pp_degree = 1
    if vpp > 1:
        strategy.pipeline.vpp_degree = vpp
        strategy.pipeline.vpp_seg_method = "Linear"
    strategy.pipeline.accumulate_steps = MICROBATCHES
    strategy.pipeline.micro_batch_size = BATCH // MICROBATCHES
    opt = paddle.optimizer.SGD(0.1, parameters=model.parameters())
    dist_model = dist.to_static(model, loader, paddle.nn.MSELoss(), opt, strategy=strategy)
    dist_model.train()
    losses = []
    for step, (x, y) in enumerate(loader()):
        if step == steps:
            break
        losses.append(np.asarray(dist_model(x, y), dtype=np.float64).reshape(-1).tolist())
    plan = dist_model._engine._job_plan
    return {
        "losses": losses,
        "jobs": [[job.type(), job.micro_batch_id()] for job in plan.job_list()],
        "ops": {t: [op.name() for op in plan.ir_program(t).global_block().ops] for t in plan.job_types()},
        "params": {
            n: np.asarray(p.numpy(), dtype=np.float64).tolist() for n, p in dist_model.state_dict("param").items()
        },
    }


def main(argv: list[str]) -> None:
    install()
    steps = int(argv[0])
    out = {}
    for arg in argv[1:]:
        mode, _, vpp = arg.partition("@vpp=")
        try:
            out[arg] = train(mode, steps, int(vpp or 1))
        except Exception as err:  # reported to the test, which expects some modes to fail
            out[arg] = {"error": f"{type(err).__name__}: {err}"}
            # the engine fails half-way through its static-graph build and stays in static mode
            paddle.disable_static()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
