"""What the server holds and reads: only documents the editor opened (a request for another URI reads nothing, not
a `.py`, not a FIFO), and none over the reader's cap (E077 instead of a check)."""

from __future__ import annotations

import asyncio
import os

import pytest
from conftest import Editor, doc
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from ppdsl.common.files import SCHEDULE_BYTES, MiB
from ppdsl.lsp.documents import ReaderWorkspace

ORDER = "order { forward * microbatches backward * microbatches optimizer }\n"


def requests(client: LanguageClient, uri: str) -> list:
    ident, pos = lsp.TextDocumentIdentifier(uri), lsp.Position(0, 7)
    return [
        client.text_document_hover_async(lsp.HoverParams(text_document=ident, position=pos)),
        client.text_document_definition_async(lsp.DefinitionParams(text_document=ident, position=pos)),
        client.text_document_references_async(
            lsp.ReferenceParams(text_document=ident, position=pos, context=lsp.ReferenceContext(True))
        ),
        client.text_document_document_symbol_async(lsp.DocumentSymbolParams(text_document=ident)),
        client.text_document_code_lens_async(lsp.CodeLensParams(text_document=ident)),
        client.text_document_formatting_async(
            lsp.DocumentFormattingParams(text_document=ident, options=lsp.FormattingOptions(4, True))
        ),
    ]


@pytest.mark.asyncio(loop_scope="module")
async def test_requests_for_unopened_documents_read_nothing(client: LanguageClient, tmp_path):
    secret = tmp_path / "secret.py"
    secret.write_text("param secret = 42\n", encoding="utf-8")  # a hover quoted it, read by pygls
    saved = tmp_path / "saved.sched"
    saved.write_text("param secret = 42\n" + ORDER, encoding="utf-8")
    fifo = tmp_path / "pipe.sched"
    os.mkfifo(fifo)  # opening it waits for a writer: pygls' read hung the server
    for path in (secret, saved, fifo):
        answers = await asyncio.wait_for(asyncio.gather(*requests(client, path.as_uri())), 30)
        assert [a or None for a in answers] == [None] * 6, path.name
    # and the server still serves an opened document
    opened = tmp_path / "open.sched"
    assert await Editor(client).open(opened, "param secret = 42\n" + ORDER) == []
    hover = await client.text_document_hover_async(lsp.HoverParams(doc(opened), lsp.Position(0, 7)))
    assert "param secret = 42" in hover.contents.value


def test_the_workspace_reads_no_unopened_document():
    workspace = ReaderWorkspace(None)
    for uri in ("file:///dev/zero", "file:///etc/passwd", "file:///dev/stdin"):
        assert workspace.get_text_document(uri).source == ""
        assert workspace.opened(uri) is None


@pytest.mark.asyncio(loop_scope="module")
async def test_a_document_over_the_cap_is_refused_with_a_diagnostic(client: LanguageClient, tmp_path):
    path = tmp_path / "huge.sched"
    big = "# padding\n" * (SCHEDULE_BYTES // 10 + 1) + ORDER  # a little over 16 MiB
    editor = Editor(client)
    (diag,) = await editor.open(path, big)
    assert diag.code == "E077" and "16 MiB" in diag.message and diag.range.start.line == 0
    assert await client.text_document_hover_async(lsp.HoverParams(doc(path), lsp.Position(0, 2))) is None
    # its whole text again, under the cap: checked as usual
    assert await editor.change(path, ORDER) == []


def test_edits_that_grow_a_document_past_the_cap_drop_it():
    workspace = ReaderWorkspace(None)
    uri = "file:///x/grow.sched"
    workspace.put_text_document(
        lsp.TextDocumentItem(uri=uri, language_id="sched", version=1, text="#" * (SCHEDULE_BYTES - MiB))
    )
    assert workspace.opened(uri) is not None
    ident = lsp.VersionedTextDocumentIdentifier(uri=uri, version=2)
    insert = lsp.TextDocumentContentChangePartial(lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), "#" * (2 * MiB))
    workspace.update_text_document(ident, insert)
    assert workspace.opened(uri) is None and workspace.oversized[uri] == SCHEDULE_BYTES + MiB
    assert workspace.get_text_document(uri).source == ""  # not held
    workspace.update_text_document(
        lsp.VersionedTextDocumentIdentifier(uri=uri, version=3), insert
    )  # nothing to apply it to
    assert workspace.opened(uri) is None
    workspace.update_text_document(
        lsp.VersionedTextDocumentIdentifier(uri=uri, version=4), lsp.TextDocumentContentChangeWholeDocument(ORDER)
    )
    assert workspace.opened(uri).source == ORDER and workspace.opened(uri).version == 4
