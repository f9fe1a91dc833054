from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "The language server (`ppdsl lsp`) holds and checks a document of at most 16 MiB, the size `ppdsl check` "
    "reads of a schedule (E052). A larger one is not kept, parsed or checked: it has this one diagnostic "
    "until it is smaller (close and reopen it, or let the editor send its whole text). A schedule that large "
    "is better split into files that `include` each other.",
    cmd(
        "ppdsl lsp",
        note="a 20 MiB huge.sched opened in an editor",
        setting="an editor running the language server",
    ),
    cmd(
        "ppdsl lsp",
        note="huge.sched split into parts that `include` each other, each opened in an editor",
        setting="an editor running the language server",
    ),
)
