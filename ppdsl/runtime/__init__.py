"""The Paddle runtime: imports paddle only when called (elsewhere in ppdsl, only paddle_pass.py imports it).

request.py         `RunRequest`: every option of a run once (default, help, validation), `TrainConfig`
run.py             `run(request) -> RunReport`: check, resume, train on one process or one per rank
launch.py          one process per rank through paddle.distributed.launch, supervised
model.py           the `--model` contract (`ModelContext`, `Model`)
builtin_models.py  the built-in models (a small GPT, the default, and an MLP) and loading a model by name
layers.py          nn.Layer stacks built eagerly and traced into the program stage by stage (`ctx.pipeline`)
program.py         the training program: forward, backward, gradient accumulation, per-stage optimizer
stages.py          completes op roles and stage (chunk) ids
split.py           classifies ops into job types and splits the program into one program per job
streams.py         applies the schedule's stream / priority / attribute rules to ops
skip_gc.py         what each job keeps alive for later jobs of its micro-batch
plan.py            from a `PlanSpec` (ppdsl.plan.spec): jobs in schedule order, skip-GC variables, `core.Plan`
train.py           the training loop (a step whose parameters go NaN stops it) and the run summary
checkpoint.py      checkpoints: written atomically, found for --resume, read without trusting them; the lock
profile.py         measured job timings and held memory, from Paddle's host profiler
memory.py          activation bytes measured on the real program, as a memory model (`ppdsl check --model`)
"""
