from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "The language server (`ppdsl lsp`) reads a message of at most 97 MiB (`Content-Length`): any document it "
    "holds (E077) fits, whatever its JSON escapes. A longer length is not read, for the server would have to "
    "hold it; and what follows it cannot be framed, so the server answers with an error and exits (status 1). "
    "A length that is only wrong costs that one message: the server answers it with a parse error and reads on "
    "at the next header. A client that sends such a length has a bug; restart the server once it is fixed.",
    cmd(
        "ppdsl lsp",
        note="a client that sends `Content-Length: 99999999999` before a message",
        setting="an editor running the language server",
    ),
    cmd(
        "ppdsl lsp",
        note="a client that sends each message's length in bytes of its UTF-8 body",
        setting="an editor running the language server",
    ),
)
