"""`ppdsl lsp`: the language server for editors (`ppdsl.lsp`), over stdin / stdout."""

from __future__ import annotations

from ppdsl.cli.app import app
from ppdsl.cli.common import fail
from ppdsl.common.diagnostics import Diagnostic


@app.command("lsp")
def lsp_cmd() -> None:
    """Run the language server on stdin / stdout (editors start it; see the README's Editor support)."""
    try:
        import pygls  # noqa: F401  (an optional dependency: say so rather than fail on the import)
    except ImportError:
        fail([Diagnostic("E099", "`ppdsl lsp` needs pygls, which is not installed", help="pip install 'ppdsl[lsp]'")])
    from ppdsl.lsp.server import serve

    serve()
