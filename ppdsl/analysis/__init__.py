"""A schedule at given sizes: expansion, checks, cross-rank execution, costs, memory.

`scenario.Scenario` is the one way in (schedule + sizes + params + costs + communication semantics);
`expand` binds sizes and runs every rank's order into an `expansion.Expansion`; `checks` proves each rank's
order complete and locally ordered; `execution` runs all ranks together (timing, deadlocks); `check` puts them
together as `ppdsl check` reports them. Imports `ppdsl.language` and `ppdsl.common`, never the runtime:
memory measured on a real program comes in through `Scenario.memory`, a hook the caller passes.
"""
