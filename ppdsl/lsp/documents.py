"""The documents the server holds: what the editor opened, never a file read behind ppdsl's reader, and none larger
than the reader's cap.

pygls answers a request for a document the editor never opened by reading its path from disk, whatever it is (a
`.py` quoted in a hover, a FIFO that hangs the server, `/dev/zero` that fills its memory). Here a document not
opened has no text: the server answers its requests with nothing, and what it reads from disk (an include) goes
through `ppdsl.lsp.symbols.read_saved`, ppdsl's reader. A document the editor opens or edits past the size
`ppdsl check` reads (`SCHEDULE_BYTES`) is not kept: it is marked too large (E077 on it, no check, no index) until a
change gives its whole text again or it is closed, so the server holds at most that much per document.
"""

from __future__ import annotations

from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.workspace import TextDocument, Workspace

from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.files import SCHEDULE_BYTES, MiB


def utf8_size(text: str, limit: int = SCHEDULE_BYTES) -> int | None:
    """The UTF-8 size of `text` when it is over `limit` bytes, else None (counted only when it may be: a
    character is one to four bytes)."""
    if len(text) * 4 <= limit:
        return None
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return size if size > limit else None


def too_large(size: int, limit: int = SCHEDULE_BYTES) -> Diagnostic:
    return Diagnostic(
        "E077",
        f"this document is {size / MiB:.1f} MiB, larger than the {limit // MiB} MiB the language server (and "
        "`ppdsl check`) reads: it is not checked",
        help="split it into files that `include` each other; once it is smaller, close and reopen it",
    )


class _Document(TextDocument):
    """A document as pygls keeps it, but one the editor did not open has no text (pygls would read its path)."""

    @property
    def source(self) -> str:
        return self._source or ""


class ReaderWorkspace(Workspace):
    """pygls' workspace, holding only what the editor opened and at most `SCHEDULE_BYTES` of each document;
    `oversized` maps the URI of each document that went past it to its size (URIs unquoted, as pygls keys its
    documents)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.oversized: dict[str, int] = {}

    def _create_text_document(
        self, doc_uri: str, source: str | None = None, version: int | None = None, language_id: str | None = None
    ) -> TextDocument:
        return _Document(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self._position_codec,
        )

    def opened(self, uri: str) -> TextDocument | None:
        """The document the editor opened at `uri`, None if it did not (or it is too large to hold)."""
        uri = unquote(uri)
        return None if uri in self.oversized else self.text_documents.get(uri)

    def put_text_document(self, text_document: lsp.TextDocumentItem, notebook_uri: str | None = None) -> None:
        size = utf8_size(text_document.text)
        self.oversized.pop(unquote(text_document.uri), None)
        if size is not None:
            self.oversized[unquote(text_document.uri)] = size
            text_document = lsp.TextDocumentItem(
                uri=text_document.uri, language_id=text_document.language_id, version=text_document.version, text=""
            )
        super().put_text_document(text_document, notebook_uri)

    def update_text_document(
        self, text_doc: lsp.VersionedTextDocumentIdentifier, change: lsp.TextDocumentContentChangeEvent
    ) -> None:
        uri = unquote(text_doc.uri)
        whole = not isinstance(change, lsp.TextDocumentContentChangePartial)
        if uri in self.oversized and not whole:
            # the text it changes was not kept: nothing to apply it to until the editor sends the whole text
            self.text_documents[uri].version = text_doc.version
            return
        if whole and (size := utf8_size(change.text)) is not None:
            self._drop(uri, text_doc.version, size)
            return
        super().update_text_document(text_doc, change)
        doc = self.text_documents[uri]
        if (size := utf8_size(doc.source)) is not None:  # many small edits add up
            self._drop(uri, text_doc.version, size)
        else:
            self.oversized.pop(uri, None)

    def _drop(self, uri: str, version: int, size: int) -> None:
        doc = self.text_documents[uri]
        doc._source, doc.version = "", version
        self.oversized[uri] = size

    def remove_text_document(self, doc_uri: str) -> None:
        self.oversized.pop(unquote(doc_uri), None)
        super().remove_text_document(doc_uri)
