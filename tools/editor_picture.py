"""Draw docs/editor-deadlock.png: what `ppdsl lsp` sends an editor for a schedule that deadlocks.

    python tools/editor_picture.py [-o docs/editor-deadlock.png]

A real client (pygls) starts `ppdsl lsp` over stdio, opens tests/ui/deadlock.sched (its `# args:` line written as
the server's `# ppdsl:` directive) and asks for its diagnostics and code lenses. The picture is a rendering of
exactly those: the file's text, a red squiggle under each diagnostic's range, a blue underline under each related
location (every rank's waiting statement) with its message, the code lenses above their line, and the diagnostic's
message as an editor's hover shows it. It is not a screenshot of VS Code (none runs here).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parent.parent
CASE = ROOT / "tests" / "ui" / "deadlock.sched"


async def server_output(text: str) -> tuple[list[lsp.Diagnostic], list[lsp.CodeLens]]:
    client = LanguageClient("editor-picture", "1")
    arrived = asyncio.Event()
    published: list[lsp.Diagnostic] = []

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        published[:] = params.diagnostics
        arrived.set()

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    await client.start_io(sys.executable, "-m", "ppdsl.cli", "lsp", env=env)
    await client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=ROOT.as_uri()))
    client.initialized(lsp.InitializedParams())
    uri = CASE.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="sched", version=1, text=text))
    )
    await asyncio.wait_for(arrived.wait(), 60)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return list(published), list(lenses or [])


def draw(text: str, diagnostics: list[lsp.Diagnostic], lenses: list[lsp.CodeLens], output: Path) -> None:
    lines = text.rstrip("\n").split("\n")
    lens_lines = {lens.range.start.line: [] for lens in lenses}
    for lens in lenses:
        lens_lines[lens.range.start.line].append(lens.command.title)
    rows: list[tuple[str, int | None, str]] = []  # (kind, line index, text)
    for i, line in enumerate(lines):
        if i in lens_lines:
            rows.append(("lens", None, "  |  ".join(lens_lines[i])))
        rows.append(("code", i, line))
    diag = diagnostics[0]
    hover = [f"{diag.code}  {diag.message.splitlines()[0]}", *diag.message.splitlines()[1:]]
    related = diag.related_information or []
    hover += ["", "related:"] + [f"  line {r.location.range.start.line + 1}: {r.message}" for r in related]

    gutter = 0.07
    fig_h = (len(rows) + len(hover) + 4) * 0.26
    fig = plt.figure(figsize=(11.5, fig_h), dpi=110)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    fig.patch.set_facecolor("#1e1e1e")
    step = 1 / (len(rows) + len(hover) + 4)
    mono = {"family": "DejaVu Sans Mono", "size": 10.5}
    y_of: dict[int, float] = {}
    y = 1 - step
    for kind, index, content in rows:
        if kind == "lens":
            ax.text(gutter, y, content, color="#999999", fontsize=8.5, family="DejaVu Sans", va="center")
        else:
            y_of[index] = y
            ax.text(gutter - 0.012, y, str(index + 1), color="#858585", ha="right", va="center", **mono)
            ax.text(gutter, y, content, color="#d4d4d4", va="center", **mono)
        y -= step
    # the width of one character of the code's font, in axes units, measured on the canvas
    probe = ax.text(0, 0, "M" * 100, **mono)
    fig.canvas.draw()
    char_w = probe.get_window_extent().width / ax.get_window_extent().width / 100
    probe.remove()

    def underline(r: lsp.Range, colour: str, wavy: bool) -> None:
        base = y_of[r.start.line] - step * 0.42
        x0 = gutter + r.start.character * char_w
        x1 = gutter + (r.end.character if r.end.line == r.start.line else len(lines[r.start.line])) * char_w
        xs = np.linspace(x0, x1, 200)
        ys = base + (np.sin((xs - x0) / char_w * np.pi) * step * 0.08 if wavy else 0 * xs)
        ax.plot(xs, ys, color=colour, lw=1.2 if wavy else 1.5, ls="-" if wavy else (0, (2, 1.5)))

    for r in related:
        if r.location.uri == CASE.as_uri():
            underline(r.location.range, "#4fa3ff", wavy=False)
            end = r.location.range.end
            ax.text(
                gutter + (len(lines[end.line]) + 3) * char_w,  # after the line, as an inline hint
                y_of[end.line],
                f"← {r.message}",
                color="#4fa3ff",
                fontsize=8.5,
                family="DejaVu Sans",
                va="center",
            )
    underline(diag.range, "#f14c4c", wavy=True)

    top = y - step * 0.5
    box_h = step * (len(hover) + 0.6)
    ax.add_patch(
        plt.Rectangle((gutter - 0.01, top - box_h), 0.93, box_h, facecolor="#252526", edgecolor="#454545", lw=1)
    )
    yy = top - step * 0.8
    for j, line in enumerate(hover):
        colour = "#f14c4c" if j == 0 else ("#4fa3ff" if line.startswith("  line") else "#cccccc")
        ax.text(gutter, yy, line, color=colour, va="center", fontsize=9.5, family="DejaVu Sans Mono")
        yy -= step
    ax.text(
        0.5,
        step * 0.7,
        "a rendering of `ppdsl lsp`'s real output for tests/ui/deadlock.sched (diagnostic, related information, code "
        "lens), not a VS Code window",
        color="#777777",
        fontsize=8,
        ha="center",
        va="center",
        family="DejaVu Sans",
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, facecolor=fig.get_facecolor())
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", default=str(ROOT / "docs" / "editor-deadlock.png"))
    args = parser.parse_args()
    text = CASE.read_text(encoding="utf-8").replace("# args:", "# ppdsl:", 1)
    diagnostics, lenses = asyncio.run(server_output(text))
    draw(text, diagnostics, lenses, Path(args.output))
    print(f"wrote {args.output}: {[d.code for d in diagnostics]}")


if __name__ == "__main__":
    main()
