"""Positions between code points and the client's code units: the same answers as pygls' codec, in time linear in
the line (hover, definition, references and rename on a 32k-character line were 80 s each when every conversion
counted a prefix character by character)."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from conftest import Editor, doc
from lsprotocol import types as lsp
from pygls.workspace.position_codec import PositionCodec
from pytest_lsp import LanguageClient

from ppdsl.lsp.convert import Units, from_position, position

ALPHABET = "ab_ é中\U0001f600\U0001f4a9\t"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
def test_conversions_agree_with_pygls_codec(encoding: str):
    codec = PositionCodec(encoding=encoding)
    units = Units(encoding)
    rng = random.Random(encoding)
    for _ in range(300):
        line = "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 40)))
        assert units(line) == codec.client_num_units(line)
        for chars in range(len(line) + 1):
            assert units.column(line, chars) == codec.client_num_units(line[:chars])
            pos = position([line], 1, chars + 1, units)
            assert (pos.line, pos.character) == (0, codec.client_num_units(line[:chars]))
        for character in range(units(line) + 2):
            # the old loop: every character whose end is within the column
            expected = 0
            while expected < len(line) and codec.client_num_units(line[: expected + 1]) <= character:
                expected += 1
            assert from_position([line], lsp.Position(0, character), units) == (1, expected + 1)


LONG = 2_500  # statements on one line: 32k characters


@pytest.mark.asyncio(loop_scope="module")
async def test_requests_on_a_32k_character_line_answer_promptly(client: LanguageClient, tmp_path):
    line = "order { let v = 1" + "  forward * v" * LONG + "  backward * 1  optimizer }  # \U0001f600"
    path = tmp_path / "long.sched"
    await Editor(client).open(path, "# ppdsl: --pp 2 -m 4\n" + line + "\n")
    end = lsp.Position(1, line.rindex("v"))
    start = time.perf_counter()
    hover = client.text_document_hover_async(lsp.HoverParams(text_document=doc(path), position=end))
    definition = client.text_document_definition_async(lsp.DefinitionParams(text_document=doc(path), position=end))
    context = lsp.ReferenceContext(include_declaration=True)
    refs = client.text_document_references_async(
        lsp.ReferenceParams(text_document=doc(path), position=end, context=context)
    )
    rename = client.text_document_rename_async(lsp.RenameParams(text_document=doc(path), position=end, new_name="w"))
    hovered, found, used, renamed = await asyncio.wait_for(asyncio.gather(hover, definition, refs, rename), 120)
    seconds = time.perf_counter() - start
    assert "v" in hovered.contents.value
    assert (found.range.start.line, found.range.start.character) == (1, len("order { let "))
    assert len(used) == LONG + 1 and sorted(r.range.start.character for r in used)[-1] == end.character
    assert sum(len(edits) for edits in renamed.changes.values()) == LONG + 1
    # quadratic, these took minutes (80 s each on the machine the issue was found on); linear, about a second
    assert seconds < 30, f"four requests on a 32k-character line took {seconds:.1f} s"
