"""A real client over stdio (pytest-lsp) against `ppdsl lsp`, shared by a test module, and helpers to open a file
and wait for its diagnostics."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from paths import ROOT

SERVER = [sys.executable, "-m", "ppdsl.cli", "lsp"]
WAIT = 30.0  # seconds a test waits for diagnostics at most (a loaded machine); the benchmark measures latency


async def start(client: LanguageClient, options: dict | None = None) -> None:
    await client.initialize_session(
        lsp.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=ROOT.as_uri(),
            initialization_options=options,
        )
    )


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    await start(lsp_client)
    yield
    await lsp_client.shutdown_session()


class Editor:
    """Open, change and close documents, and wait for what the server publishes for them."""

    def __init__(self, client: LanguageClient):
        self.client = client
        self.versions: dict[str, int] = {}

    async def open(self, path: Path, text: str | None = None) -> list[lsp.Diagnostic]:
        uri = path.resolve().as_uri()
        text = path.read_text(encoding="utf-8") if text is None else text
        self.client.diagnostics.pop(uri, None)
        self.versions[uri] = 1
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="sched", version=1, text=text))
        )
        return await self.diagnostics(uri)

    async def change(self, path: Path, text: str) -> list[lsp.Diagnostic]:
        uri = path.resolve().as_uri()
        self.versions[uri] += 1
        self.client.diagnostics.pop(uri, None)
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                [lsp.TextDocumentContentChangeWholeDocument(text)],
            )
        )
        return await self.diagnostics(uri)

    def close(self, path: Path) -> None:
        uri = path.resolve().as_uri()
        self.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
        self.versions.pop(uri, None)

    async def diagnostics(self, uri: str) -> list[lsp.Diagnostic]:
        async def published() -> list[lsp.Diagnostic]:
            while uri not in self.client.diagnostics:
                await asyncio.sleep(0.002)
            return list(self.client.diagnostics[uri])

        return await asyncio.wait_for(published(), WAIT)


def doc(path: Path) -> lsp.TextDocumentIdentifier:
    return lsp.TextDocumentIdentifier(path.resolve().as_uri())
