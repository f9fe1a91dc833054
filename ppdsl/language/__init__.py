"""The `.sched` language: text -> AST -> resolved `ScheduleDef`, independent of sizes.

`parser` (grammar in `sched.lark`) builds the AST (`ast`); `resolve` follows includes and resolves names,
`typecheck` types expressions and order statements, into the IR (`ir`: data only). The order compiler
(`lowering`, with the backends `fast_order` and `readable_order`) writes the IR's order as Python; `runnable`
makes the IR executable; `library` finds shipped schedules by name. Imports only `ppdsl.plan` (the job kinds and
a job's identity) and `ppdsl.common`.
"""
