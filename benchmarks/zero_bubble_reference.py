"""The zero-bubble authors' automatic schedulers, run from a local clone of their repository, for comparison.

sail-sg/zero-bubble-pipeline-parallelism keeps its schedulers in
`megatron/core/pipeline_parallel/zerobubble/scheduler/`: `zb.py` (the one-chunk greedy search under a per-stage
memory limit, ZB-H1 / ZB-H2 automatic), `v_auto_schedule.py` (the V-shape building-block search of "Pipeline
Parallelism with Controllable Memory"), `zbv_greedy.py` (V-Min / V-Half) and `zbv.py` (ZB-V greedy). Their
package `__init__` files import Megatron, apex and torch.distributed; so this module puts stub packages in their
place while it imports the scheduler files themselves (`torch` and `pulp` stubbed too: zb.py names
`torch.Tensor` in an annotation and calls `pulp.value` on floats), then removes the stubs. Nothing of theirs is
copied; `--zb-repo` names the clone.

Orders come back per rank as (kind, chunk, micro-batch) with kind F, B (input gradient) or W. Their memory units:
F +1, B 0, W -1; a one-chunk limit of pp is ZB-H1's memory, 2pp ZB-H2's. V costs are per chunk and scalar.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import types
from pathlib import Path

PACKAGE = "megatron.core.pipeline_parallel.zerobubble.scheduler"
_LOADED: dict[str, types.SimpleNamespace] = {}


def scheduler_dir(repo: str | Path) -> Path:
    direct = Path(repo).joinpath(*PACKAGE.split("."))
    if (direct / "zb.py").is_file():
        return direct
    hits = sorted(Path(repo).glob("**/zerobubble/scheduler/zb.py"))
    if not hits:
        raise FileNotFoundError(f"no zerobubble/scheduler/zb.py under {repo}")
    return hits[0].parent


def load(repo: str | Path) -> types.SimpleNamespace:
    """Their scheduler modules (graph, zb, zbv, zbv_greedy, v_auto_schedule), imported without Megatron."""
    key = str(Path(repo).resolve())
    if key in _LOADED:
        return _LOADED[key]
    here = scheduler_dir(repo)
    parts = PACKAGE.split(".")
    root = here.parents[len(parts) - 1]
    saved = {k: v for k, v in sys.modules.items() if k == "megatron" or k.startswith("megatron.")}
    for k in saved:
        del sys.modules[k]
    added = []
    try:
        for i in range(len(parts)):
            name = ".".join(parts[: i + 1])
            stub = types.ModuleType(name)
            stub.__path__ = [str(root.joinpath(*parts[: i + 1]))]
            sys.modules[name] = added.append(name) or stub
        if "torch" not in sys.modules:
            torch = types.ModuleType("torch")
            torch.Tensor = object
            sys.modules["torch"] = added.append("torch") or torch
        try:
            importlib.import_module("pulp")
        except ImportError:
            pulp = types.ModuleType("pulp")
            pulp.value = lambda x: x
            sys.modules["pulp"] = added.append("pulp") or pulp
        modules = types.SimpleNamespace()
        for short in ("graph", "zb", "zbv", "zbv_greedy", "v_auto_schedule"):
            full = f"{PACKAGE}.{short}"
            setattr(modules, short, importlib.import_module(full) if (here / f"{short}.py").is_file() else None)
            added.append(full)
    finally:
        for k in added:
            sys.modules.pop(k, None)
        sys.modules.update(saved)
    _LOADED[key] = modules
    return modules


def _orders(nodes_per_rank) -> list[list[tuple[str, int, int]]]:
    def kind(node) -> str:
        return str(getattr(node.type, "value", node.type)).upper()

    def mb(node) -> int:
        return int(getattr(node, "microbatch", getattr(node, "minibatch", -1)))

    return [[(kind(n), int(n.chunk), mb(n)) for n in rank] for rank in nodes_per_rank]


def zb_auto(repo, pp: int, m: int, f, b, w, comm: float, mem_limit: float | None):
    """zb.py's search; f, b, w (and mem_limit) may be per-stage lists. Raises ValueError when nothing fits."""
    z = load(repo)

    def per_stage(x):
        return [float(v) for v in x] if isinstance(x, (list, tuple)) else [float(x)] * pp

    config = z.graph.GraphConfig(
        cost_f=per_stage(f),
        cost_b=per_stage(b),
        cost_w=per_stage(w),
        cost_comm=float(comm),
        mem_f=[1.0] * pp,
        mem_b=[0.0] * pp,
        mem_w=[-1.0] * pp,
        max_mem=None if mem_limit is None else per_stage(mem_limit),
        n_stages=pp,
        n_micro=m,
    )
    graph = z.zb.Graph.build_graph(pp, m, config)
    with contextlib.redirect_stdout(io.StringIO()):
        _, _, complete_time = z.zb.initial_solution(graph, print_result=False)
        return _orders(z.zb.create_scheduled_nodes(graph, complete_time))


def v_auto(repo, pp: int, m: int, f: float, b: float, w: float, comm: float, variant):
    """A V schedule: `variant` a number (v_auto_schedule's search, peak in chunk activations), "vmin" or
    "vhalf" (zbv_greedy's patterns) or "vzb" (zbv's ZB-V greedy). Raises ValueError when nothing fits."""
    z = load(repo)
    with contextlib.redirect_stdout(io.StringIO()):
        if isinstance(variant, (int, float)):
            try:
                return _orders(z.v_auto_schedule.schedule(pp, m, (f, b, w, comm), variant))
            except TypeError as err:  # its transform_schedule(None): no building block fits
                raise ValueError(f"no V building block within {variant}") from err
        config = z.graph.GraphConfig(
            cost_f=[float(f)] * pp,
            cost_b=[float(b)] * pp,
            cost_w=[float(w)] * pp,
            cost_comm=float(comm),
            mem_f=[1.0] * pp,
            mem_b=[0.0] * pp,
            mem_w=[-1.0] * pp,
            max_mem=None,
            max_chunks=2,
            n_stages=pp,
            n_micro=m,
        )
        if variant in ("vmin", "vhalf"):
            graph = z.zbv_greedy.PipelineGraph(pp, m, variant[1:], f, b, w, comm)
        else:
            graph = z.zbv.PipelineGraph(pp, m, f, b, w, comm, f_mem=1, b_mem=0, w_mem=-1, max_mem=2 * pp)
        return _orders(graph.create_schedule(config))


def available(repo: str | Path | None) -> bool:
    return repo is not None and os.path.isdir(repo) and any(Path(repo).glob("**/zerobubble/scheduler/zb.py"))
