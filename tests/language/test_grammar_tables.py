"""The parser is built without Lark's temp-dir pickle cache: from shipped JSON tables that match the grammar, and
parse exactly as tables built from it; a pickle planted where Lark's `cache=True` looks is never loaded."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from lark.exceptions import UnexpectedInput

from ppdsl.language import grammar_tables

from paths import LIBRARY, ROOT, TESTS


def test_the_shipped_tables_are_built_from_the_current_grammar(request: pytest.FixtureRequest):
    # Lark numbers LALR states in hash order, so the text differs between processes: the key decides
    if request.config.getoption("--update-golden"):
        if grammar_tables._shipped_parser() is None:
            text = grammar_tables.tables_text(grammar_tables.build_parser())
            grammar_tables.TABLES_PATH.write_text(text, encoding="utf-8")
        return
    assert grammar_tables._shipped_parser() is not None, (
        f"{grammar_tables.TABLES} is not built from the current sched.lark (pytest --update-golden rewrites it)"
    )


BAD_INPUTS = [
    "order { forward ) }",
    'require pp > 1 "message"',
    "order { for i in 3 { forward } }",
    "param k = = 1",
    "order {\n forward\n",
    'rule r { stream = "x" ',
]


def test_the_shipped_tables_parse_every_schedule_as_the_grammar_does():
    shipped, built = grammar_tables._shipped_parser(), grammar_tables.build_parser()
    assert shipped is not None
    files = sorted(LIBRARY.glob("*.sched")) + sorted(TESTS.rglob("*.sched"))
    parsed = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            tree = built.parse(text)
        except UnexpectedInput:
            continue  # UI cases with syntax errors: compared below
        assert shipped.parse(text) == tree, path
        parsed += 1
    assert parsed > 20
    for text in BAD_INPUTS:
        with pytest.raises(UnexpectedInput) as from_built:
            built.parse(text)
        with pytest.raises(UnexpectedInput) as from_shipped:
            shipped.parse(text)
        assert type(from_shipped.value) is type(from_built.value), text
        assert getattr(from_shipped.value, "expected", None) == getattr(from_built.value, "expected", None), text
        assert (from_shipped.value.line, from_shipped.value.column) == (from_built.value.line, from_built.value.column)


class _Payload:
    """Unpickling this writes `marker`: what an attacker's planted cache file would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def _python(code: str, tmpdir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("tables", ["shipped", "missing"])
def test_a_pickle_planted_at_larks_cache_path_is_never_loaded(tmp_path: Path, tables: str):
    shared_tmp, marker = tmp_path / "tmp", tmp_path / "marker"
    shared_tmp.mkdir()
    lark_with_cache = (
        "from lark import Lark\nfrom ppdsl.language.grammar_tables import LARK_OPTIONS\n"
        "Lark.open_from_package('ppdsl.language', 'sched.lark', ('',), **LARK_OPTIONS, cache=True)\n"
    )
    assert _python(lark_with_cache, shared_tmp).returncode == 0  # writes the cache file the options name
    [cache] = shared_tmp.glob(".lark_cache_*")
    header = cache.read_bytes().split(b"\n", 1)[0]  # the grammar hash Lark compares before unpickling
    planted = header + b"\n" + pickle.dumps(_Payload(marker))
    # the plant is real: the parser's options, with Lark's cache, run it (and Lark then rewrites the file)
    cache.write_bytes(planted)
    _python(lark_with_cache, shared_tmp)
    assert marker.exists()
    marker.unlink()
    cache.write_bytes(planted)

    missing = "grammar_tables.TABLES_PATH = grammar_tables.TABLES_PATH.with_name('absent.json')\n"
    ppdsl_parse = (
        "from ppdsl.language import grammar_tables\n"
        + (missing if tables == "missing" else "")
        + "from ppdsl.language.parser import parse\n"
        "print(len(parse(open('schedules/1f1b.sched').read(), '1f1b.sched').items))\n"
    )
    run = _python(ppdsl_parse, shared_tmp)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) > 0
    assert not marker.exists()
    assert cache.read_bytes() == planted  # nor was the file read or rewritten
