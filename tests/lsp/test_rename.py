"""Renaming an included file that is a symlink renames the link, never its target (which may be anyone's, outside
the project), and edits only the includes that go through that link."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp

from ppdsl.lsp import features
from ppdsl.lsp.checking import check_text
from ppdsl.lsp.convert import Units
from ppdsl.lsp.features import Document
from ppdsl.lsp.sizes import Sizes
from ppdsl.lsp.symbols import build_index, read_saved

ORDER = "order { forward * microbatches backward * microbatches optimizer }\n"


def document(path: Path, text: str) -> Document:
    return Document(
        str(path),
        text,
        check_text(text, str(path), Sizes()),
        build_index(str(path), text, read_saved),
        Units("utf-16"),
        [],
    )


def rename_at(doc: Document, needle: str, new: str) -> lsp.WorkspaceEdit:
    line = doc.text[: doc.text.index(needle)].count("\n")
    col = doc.text.split("\n")[line].index(needle) + 2
    return features.rename(doc, line + 1, col + 1, new)


def test_renaming_a_symlinked_include_renames_the_link(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    precious = elsewhere / "precious.sched"
    precious.write_text("cost forward = 1\n", encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / "costs.sched").symlink_to(precious)
    main = project / "main.sched"
    text = f'include "costs.sched"\ninclude "{precious}"\n' + ORDER  # the target also included by its own name
    edit = rename_at(document(main, text), "costs.sched", "shared.sched")
    *texts, moved = edit.document_changes
    assert isinstance(moved, lsp.RenameFile)
    assert moved.old_uri == (project / "costs.sched").as_uri() and moved.new_uri == (project / "shared.sched").as_uri()
    assert [(t.text_document.uri, [e.new_text for e in t.edits]) for t in texts] == [(main.as_uri(), ["shared.sched"])]
    assert [e.range.start.line for e in texts[0].edits] == [0]  # not the include of the target by its own name


def test_renaming_an_include_that_is_no_link_still_renames_the_file(tmp_path):
    (tmp_path / "costs.sched").write_text("cost forward = 1\n", encoding="utf-8")
    main = tmp_path / "main.sched"
    text = 'include "costs.sched"\ninclude "./costs.sched"\n' + ORDER
    edit = rename_at(document(main, text), "costs.sched", "shared.sched")
    *texts, moved = edit.document_changes
    assert (
        moved.old_uri == (tmp_path / "costs.sched").as_uri() and moved.new_uri == (tmp_path / "shared.sched").as_uri()
    )
    assert [e.new_text for t in texts for e in t.edits] == ["shared.sched", "shared.sched"]
