"""An error in one part never stops the rest: every feature answers (or says there is nothing) on library files
cut short or with a piece deleted anywhere, in process (the stdio tests cover the protocol)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from ppdsl.lsp import features
from ppdsl.lsp.checking import check_text
from ppdsl.lsp.convert import Units, to_diagnostic
from ppdsl.lsp.features import Document, RenameRefused
from ppdsl.lsp.sizes import Sizes
from ppdsl.lsp.symbols import build_index

from paths import LIBRARY

FILES = sorted(LIBRARY.glob("*.sched"))
VARIANTS = 6  # of each file: cut short, and with a piece deleted (2 of zbvpp's 37 KB, to stay fast)
PROBES = 25  # positions asked about in each variant


utf16 = Units("utf-16")


def document(path: Path, text: str) -> Document:
    checked = check_text(text, str(path), Sizes())
    index = build_index(str(path), text, lambda p: None)
    origin = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
    lines = text.split("\n")
    diags = [
        to_diagnostic(d, str(path), lambda f: lines, utf16, checked.result, lambda f: origin)
        for d in checked.diagnostics
    ]
    return Document(str(path), text, checked, index, utf16, diags)


def variants(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(VARIANTS if len(text) < 10_000 else 2):
        a = rng.randrange(len(text))
        out.append(text[:a])  # typed up to here
        b = rng.randrange(len(text))
        out.append(text[:b] + text[b + rng.randrange(1, 40) :])  # a piece deleted
    return out


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_feature_answers_on_broken_library_files(path: Path):
    text = path.read_text(encoding="utf-8")
    rng = random.Random(path.stem)
    for variant in variants(text, hash(path.stem) & 0xFFFF):
        doc = document(path, variant)
        features.code_lenses(doc)
        features.completions(doc)
        features.document_symbols(doc)
        lines = variant.split("\n")
        for _ in range(PROBES):
            line = rng.randrange(len(lines))
            col = rng.randrange(len(lines[line]) + 1) + 1
            pos = lsp.Position(line, col - 1)
            features.hover(doc, line + 1, col, pos)
            features.definition(doc, line + 1, col)
            features.references(doc, line + 1, col, True)
            try:
                features.rename(doc, line + 1, col, "renamed")
            except RenameRefused:
                pass


def test_a_file_that_stops_mid_order_keeps_its_declarations():
    text = (LIBRARY / "vpp.sched").read_text(encoding="utf-8")
    cut = text[: text.index("order {") + len("order {\n    let")]
    doc = document(LIBRARY / "vpp.sched", cut)
    assert [d.code for d in doc.checked.diagnostics] == ["E001"]
    names = [s.name for s in features.document_symbols(doc)]
    assert "param split_backward" in names and "job recv_forward" in names
