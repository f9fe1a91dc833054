"""`ppdsl lsp`: the language server (pygls, over stdio).

On open and on every change a document is checked as `ppdsl check` checks it (`ppdsl.lsp.checking`) at the sizes
its `# ppdsl:` directive, the workspace settings or the default give (`ppdsl.lsp.sizes`), and its diagnostics are
published. A check runs on a worker thread, one at a time per document: changes that arrive meanwhile are not
queued, the newest text is checked next and a result older than the text is dropped (stale work is never
published). Requests (hover, definition, ...) are answered from the newest syntax tree and the last check, so
they never wait for a check and never fail because of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from ppdsl.common.version import __version__
from ppdsl.language.format import format_text
from ppdsl.lsp import features
from ppdsl.lsp.checking import Checked, check_text
from ppdsl.lsp.convert import Units, from_position, to_diagnostic, to_range, uri_of
from ppdsl.lsp.documents import ReaderWorkspace, too_large
from ppdsl.lsp.features import Document, RenameRefused
from ppdsl.lsp.sizes import Sizes, directive, from_settings
from ppdsl.lsp.symbols import Index, build_index, include_target, read_saved
from ppdsl.lsp.syntax import ItemCache
from ppdsl.lsp.transport import serve_stdio

log = logging.getLogger(__name__)
INCLUDE_LINE = re.compile(r'^include[ \t]+"([^"\n]*)"', re.M)  # as `ppdsl.language.parser.ITEM_START` finds items


@dataclass
class _State:
    """One open document: the last check published and the index of the newest text."""

    checked: Checked | None = None
    checked_version: int | None = None
    diagnostics: list[lsp.Diagnostic] | None = None
    index: Index | None = None
    index_version: int | None = None
    task: asyncio.Task | None = None
    # items parsed for checks (on the worker thread) and for the index (on the server's): one cache each
    check_cache: ItemCache = field(default_factory=ItemCache)
    index_cache: ItemCache = field(default_factory=ItemCache)


class PpdslServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("ppdsl", __version__)
        self.settings = Sizes()
        self.states: dict[str, _State] = {}
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ppdsl-check")
        self._units: Units | None = None

    # -------------------------------------------------------------------------------------- helpers

    @property
    def units(self) -> Units:
        """The code units positions are in, as agreed at initialize (UTF-16 unless the client offered another)."""
        encoding = str(getattr(self.workspace.position_encoding, "value", self.workspace.position_encoding))
        if self._units is None or self._units.encoding != encoding:
            self._units = Units(encoding)
        return self._units

    def opened(self, uri: str) -> TextDocument | None:
        """The document the editor opened at `uri`; None for one it did not open (which is never read from disk
        here: `ppdsl.lsp.documents`) or one too large to check (E077)."""
        workspace = self.workspace
        return workspace.opened(uri) if isinstance(workspace, ReaderWorkspace) else None

    def read(self, path: str) -> str | None:
        """An include's text: the open buffer, else the file as saved (through ppdsl's reader)."""
        doc = self.opened(uri_of(path))
        return doc.source if doc is not None else read_saved(path)

    def lines(self, path: str) -> list[str] | None:
        text = self.read(path)
        return text.split("\n") if text is not None else None

    def publish(self, uri: str, version: int | None, checked: Checked, text: str) -> list[lsp.Diagnostic]:
        """Publish a check's diagnostics: a command-line value's (no span) on the directive's line, an included
        file's on the `include` that brings it in (the first include when it comes through another one)."""
        path = checked.path
        lines = text.split("\n")
        found = directive(text, path)
        fallback = to_range(found[0], lines, self.units) if found else lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        includes = {}
        line, counted = 0, 0
        for m in INCLUDE_LINE.finditer(text):
            line, counted = line + text.count("\n", counted, m.start()), m.start()  # linear in the text
            at = lsp.Range(lsp.Position(line, 0), lsp.Position(line, self.units(m.group(0))))
            includes.setdefault(include_target(path, m.group(1)), at)

        def placed(file: str | None) -> lsp.Range:
            if file is None or not includes:
                return fallback
            return includes.get(include_target(path, str(Path(file).resolve())), next(iter(includes.values())))

        read: dict[str, list[str] | None] = {path: lines}

        def lines_of(file: str) -> list[str] | None:  # each file once, not once per diagnostic in it
            if file not in read:
                read[file] = self.lines(file)
            return read[file]

        diagnostics = [
            to_diagnostic(d, path, lines_of, self.units, checked.result, placed) for d in checked.diagnostics
        ]
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )
        return diagnostics

    # -------------------------------------------------------------------------------------- checking

    def schedule_check(self, uri: str) -> None:
        """Check the document's newest text soon; one check at a time per document."""
        state = self.states.setdefault(uri, _State())
        if state.task is None or state.task.done():
            state.task = asyncio.ensure_future(self._check_until_current(uri))

    async def _check_until_current(self, uri: str) -> None:
        loop = asyncio.get_running_loop()
        while (doc := self.opened(uri)) is not None and uri in self.states:
            text, version, settings = doc.source, doc.version, self.settings
            state = self.states[uri]
            try:
                checked = await loop.run_in_executor(
                    self.pool, check_text, text, doc.path, settings, state.checked, state.check_cache
                )
            except Exception as err:  # a bug in ppdsl: say so, and keep serving every other request
                log.exception("checking %s", uri)
                self.window_show_message(
                    lsp.ShowMessageParams(lsp.MessageType.Error, f"ppdsl lsp could not check {doc.path}: {err!r}")
                )
                return
            state = self.states.get(uri)
            current = self.opened(uri)
            if state is None or current is None:
                return  # closed meanwhile (or grown too large)
            if current.version != version or settings is not self.settings:
                continue  # stale: the text or the settings changed while it ran; check the newest
            state.checked, state.checked_version = checked, version
            state.diagnostics = self.publish(uri, version, checked, text)
            return

    def document(self, uri: str) -> Document | None:
        """The features' view of a document: the newest text's index, with the last check (run one now if there
        is none yet); None for a document the editor has not opened or that is too large."""
        doc = self.opened(uri)
        if doc is None:
            return None
        state = self.states.setdefault(uri, _State())
        if state.index is None or state.index_version != doc.version:
            state.index = build_index(doc.path, doc.source, self.read, state.index_cache)
            state.index_version = doc.version
        if state.checked is None:
            state.checked = check_text(doc.source, doc.path, self.settings, None, ItemCache())
            state.diagnostics = self.publish(uri, doc.version, state.checked, doc.source)
        return Document(doc.path, doc.source, state.checked, state.index, self.units, state.diagnostics or [])

    def where(self, uri: str, pos: lsp.Position) -> tuple[Document, int, int] | None:
        doc = self.document(uri)
        if doc is None:
            return None
        line, col = from_position(doc.text.split("\n"), pos, self.units)
        return doc, line, col

    async def pull_settings(self) -> None:
        """The `ppdsl` section of the client's settings (`workspace/configuration`), when the client answers it."""
        workspace = self.client_capabilities.workspace
        if not (workspace and workspace.configuration):
            return
        try:
            found = await self.workspace_configuration_async(
                lsp.ConfigurationParams([lsp.ConfigurationItem(section="ppdsl")])
            )
        except Exception as err:  # a client that fails to answer keeps the settings it sent
            log.info("workspace/configuration failed: %s", err)
            return
        if found and isinstance(found[0], dict):
            self.apply_settings(found[0])

    def apply_settings(self, settings: object) -> None:
        self.settings = from_settings(settings if isinstance(settings, dict) else None)
        for uri in list(self.states):
            if self.opened(uri) is not None:
                self.schedule_check(uri)

    def changed(self, uri: str) -> None:
        """A document opened or changed: check it, or say why not (E077) when it is too large to hold."""
        size = self.workspace.oversized.get(unquote(uri)) if isinstance(self.workspace, ReaderWorkspace) else None
        if size is None:
            self.schedule_check(uri)
            return
        self.states[uri] = _State()  # nothing of its earlier text is answered from
        origin = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        diagnostic = to_diagnostic(too_large(size), "", lambda _: None, self.units, None, lambda _: origin)
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[diagnostic]))


server = PpdslServer()


@server.feature(lsp.INITIALIZE)
def initialize(ls: PpdslServer, params: lsp.InitializeParams) -> None:
    ls.settings = from_settings(params.initialization_options)
    # pygls made its workspace just now; this one holds and reads documents as ppdsl does
    old = ls.workspace
    ls.protocol._workspace = ReaderWorkspace(
        old.root_uri, old._sync_kind, list(old.folders.values()), old.position_encoding
    )


@server.feature(lsp.INITIALIZED)
async def initialized(ls: PpdslServer, params: lsp.InitializedParams) -> None:
    """Ask the client for the `ppdsl` settings when it can answer (VS Code's extension does)."""
    await ls.pull_settings()


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: PpdslServer, params: lsp.DidChangeConfigurationParams) -> None:
    """New settings pushed, or (`settings: null`, VS Code's pull model) a sign to ask for them again."""
    if isinstance(params.settings, dict) and params.settings:
        ls.apply_settings(params.settings)
    else:
        await ls.pull_settings()


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: PpdslServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.states[params.text_document.uri] = _State()
    ls.changed(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: PpdslServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.changed(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: PpdslServer, params: lsp.DidSaveTextDocumentParams) -> None:
    # what includes this file reads it from disk: check every other open document again
    for uri in list(ls.states):
        if uri != params.text_document.uri:
            ls.schedule_check(uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: PpdslServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.states.pop(params.text_document.uri, None)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: PpdslServer, params: lsp.HoverParams) -> lsp.Hover | None:
    if (found := ls.where(params.text_document.uri, params.position)) is None:
        return None
    doc, line, col = found
    return features.hover(doc, line, col, params.position)


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
def code_lens(ls: PpdslServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    doc = ls.document(params.text_document.uri)
    return features.code_lenses(doc) if doc is not None else []


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=[]))
def completion(ls: PpdslServer, params: lsp.CompletionParams) -> lsp.CompletionList:
    if (found := ls.where(params.text_document.uri, params.position)) is None:
        return lsp.CompletionList(False, [])
    doc, line, col = found
    return lsp.CompletionList(False, features.completions(doc, line, col))


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
def document_symbol(ls: PpdslServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
    doc = ls.document(params.text_document.uri)
    return features.document_symbols(doc) if doc is not None else []


@server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
def definition(ls: PpdslServer, params: lsp.DefinitionParams) -> lsp.Location | None:
    if (found := ls.where(params.text_document.uri, params.position)) is None:
        return None
    doc, line, col = found
    return features.definition(doc, line, col)


@server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
def references(ls: PpdslServer, params: lsp.ReferenceParams) -> list[lsp.Location]:
    if (found := ls.where(params.text_document.uri, params.position)) is None:
        return []
    doc, line, col = found
    return features.references(doc, line, col, params.context.include_declaration)


@server.feature(lsp.TEXT_DOCUMENT_PREPARE_RENAME)
def prepare_rename(ls: PpdslServer, params: lsp.PrepareRenameParams) -> lsp.PrepareRenameResult | None:
    if (found := ls.where(params.text_document.uri, params.position)) is None:
        return None
    doc, line, col = found
    try:
        occ = features.rename_target(doc, line, col)
    except RenameRefused:
        return None
    return lsp.PrepareRenamePlaceholder(range=doc.range(occ.span), placeholder=occ.symbol.name)


@server.feature(lsp.TEXT_DOCUMENT_RENAME)
def rename(ls: PpdslServer, params: lsp.RenameParams) -> lsp.WorkspaceEdit | None:
    if (found := ls.where(params.text_document.uri, params.position)) is None:
        return None
    doc, line, col = found
    try:
        return features.rename(doc, line, col, params.new_name)
    except RenameRefused as err:
        raise ValueError(str(err)) from None  # pygls answers it as the request's error, which editors show


@server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
def formatting(ls: PpdslServer, params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit] | None:
    from ppdsl.common.diagnostics import DiagnosticError

    doc = ls.opened(params.text_document.uri)
    if doc is None:
        return None
    try:
        formatted = format_text(doc.source)
    except DiagnosticError:
        return None  # a file that does not parse is not formatted; its diagnostics say why
    if formatted == doc.source:
        return []
    lines = doc.source.split("\n")
    end = lsp.Position(len(lines) - 1, ls.units(lines[-1]))
    return [lsp.TextEdit(lsp.Range(lsp.Position(0, 0), end), formatted)]


def serve() -> None:
    """Run the server on stdin / stdout until the client says exit, closes stdin or its process is gone
    (`ppdsl.lsp.transport`); the process exits with its status."""
    status = serve_stdio(server)
    server.pool.shutdown(wait=False, cancel_futures=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    # a check still running on the worker thread, or the stdin thread blocked in a read, would hold a normal exit
    os._exit(status)
