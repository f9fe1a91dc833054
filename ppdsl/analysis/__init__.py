"""A schedule at given sizes: expansion, checks, cross-rank execution, costs, memory.

`scenario.Scenario` is the one way in (schedule + sizes + params + costs + memory + communication semantics);
`expand` binds sizes and runs every rank's order into an `expansion.Expansion`, built once with every input
applied and never written after; `checks` proves each rank's order complete and locally ordered; `execution`
runs all ranks together (timing, deadlocks); `check.check(scenario)` puts them together as `ppdsl check` reports
them. Imports `ppdsl.language` and `ppdsl.common`, never the runtime: memory measured on a real program comes in
through `Scenario.memory`, a `memory.MemoryModel` value (or how to measure one) the caller passes.
"""
