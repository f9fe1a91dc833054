from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "The language server (`ppdsl lsp`) checks a file at the sizes of its `# ppdsl:` line, written as `ppdsl "
    "check` takes them: `--pp` and `-m` (`--microbatches`), and optionally `--vpp`, `--param name=value`, "
    "`--rendezvous`, `--cost`, `--memory-limit` and `--max-jobs`. A directive with another option, a size that "
    "is not an integer from 1 up, a `--max-jobs` above `ppdsl check`'s default (a file may lower what the server "
    "takes on, not raise it), or without `--pp` and `-m` is reported on its line, and the file is checked "
    "at the workspace settings' or the default sizes (pp 4, microbatches 8) instead.",
    cmd(
        "ppdsl lsp",
        files=(("example.sched", "# ppdsl: --pp four -m 8\n" + GPIPE + "\n"),),
        note="example.sched opened in an editor",
        setting="an editor running the language server",
    ),
    cmd(
        "ppdsl lsp",
        files=(("example.sched", "# ppdsl: --pp 4 -m 8\n" + GPIPE + "\n"),),
        note="example.sched opened in an editor",
        setting="an editor running the language server",
    ),
)
