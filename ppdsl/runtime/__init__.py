"""The Paddle runtime: imports paddle only when called (elsewhere in ppdsl, only paddle_pass.py imports it).

model.py    the built-in example model and the `--model module:function` contract
program.py  the training program: forward, backward, gradient accumulation, per-stage optimizer
stages.py   completes op roles and stage (chunk) ids
split.py    classifies ops into job types and splits the program into one program per job
streams.py  applies the schedule's stream / priority / attribute rules to ops
plan.py     jobs in schedule order, skip-GC variables, `core.Plan`
train.py    the training loop, checkpoints and the run summary
"""
