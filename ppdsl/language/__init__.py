"""The `.sched` language: text -> AST -> resolved `ScheduleDef`, independent of sizes.

`parser` (grammar in `sched.lark`) builds the AST (`ast`); `resolve` follows includes, resolves names and
compiles expressions and order bodies through `lowering` into the IR (`ir`). `jobtypes` is the one table of
built-in job types; `library` finds shipped schedules by name. Imports only `ppdsl.common`.
"""
