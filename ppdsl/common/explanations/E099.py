from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "The language server speaks the Language Server Protocol through pygls, an optional dependency (the `lsp` "
    "extra; the `test` extra has it too). Every other command works without it.",
    cmd("ppdsl lsp", note="in an environment without pygls", setting="pygls not installed"),
    cmd("pip install 'ppdsl[lsp]'", "ppdsl lsp", setting="network"),
)
