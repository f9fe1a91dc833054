"""The plan vocabulary: what a job is, from the checker to every rank.

`kinds` is the one table of built-in job kinds and their properties; `jobs` a job's identity (`JobCodec`, the
packing of a job into an int, and `Job`, a job by stage); `spec` the `PlanSpec`, a checked schedule as the data a
rank trains from, and its JSON form. The language, the analysis and the runtime all read this package; it imports
only `ppdsl.common`, so a rank process never imports the language.
"""
