"""`ppdsl lsp`'s requests, through a real client over stdio: hover, code lenses, completion, the outline, go to
definition, find references and rename (of `param`, `let`, `fn`, job types and included files), formatting, and
all of them on a file with a syntax error elsewhere."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import pytest
from conftest import Editor, doc
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from typer.testing import CliRunner

import ppdsl
from ppdsl.cli import app
from ppdsl.language import ast, parser
from ppdsl.language.format import format_text

from paths import LIBRARY, UI

pytestmark = pytest.mark.asyncio(loop_scope="module")

COMMON = textwrap.dedent(
    """\
    param extra = 0
    fn warm(r) = min(pp - r - 1 + extra, microbatches)
    """
)
MAIN = textwrap.dedent(
    '''\
    # ppdsl: --pp 2 -m 4
    """1F1B with its warm-up in an included file."""
    schedule "mine"
    include "common.sched"
    job recv_forward (RF) : forward ops "pd_op.recv_v2" before forward receives
    cost forward = 1.5
    order {
        let warmup = warm(rank)
        repeat warmup { recv_forward forward }
        repeat microbatches - warmup { recv_forward forward backward }
        backward * warmup
        optimizer
    }
    '''
)


def at(text: str, needle: str, nth: int = 0, offset: int = 0) -> lsp.Position:
    """The LSP position of the `nth` occurrence of `needle` in `text` (plus `offset` characters)."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(needle, start + 1)
    line = text.count("\n", 0, start)
    return lsp.Position(line, start - (text.rfind("\n", 0, start) + 1) + offset)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "common.sched").write_text(COMMON, encoding="utf-8")
    main = tmp_path / "main.sched"
    main.write_text(MAIN, encoding="utf-8")
    return main


async def opened(client: LanguageClient, path: Path, text: str | None = None) -> list[lsp.Diagnostic]:
    return await Editor(client).open(path, text)


async def hover_text(client: LanguageClient, path: Path, pos: lsp.Position) -> str:
    result = await client.text_document_hover_async(lsp.HoverParams(doc(path), pos))
    assert result is not None
    return result.contents.value


def spots(locations) -> list[tuple[int, int]]:
    return sorted((loc.range.start.line, loc.range.start.character) for loc in locations)


# ------------------------------------------------------------------------------------------------ hover


async def test_hover_on_a_job_type_gives_its_costs_and_memory(client, project):
    assert await opened(client, project) == []
    text = await hover_text(client, project, at(MAIN, "forward backward", offset=2))
    assert "built-in job type `forward` (`F`)" in text
    assert "- cost: 1.5" in text and "- memory: allocates 1 activation per job" in text
    declared = await hover_text(client, project, at(MAIN, "recv_forward", nth=1))
    assert 'job recv_forward (RF) : forward ops "pd_op.recv_v2"' in declared and "- cost: 0" in declared


async def test_hover_on_a_parameter_gives_its_type_and_value(client, project):
    await opened(client, project)
    inc = project.parent / "common.sched"
    await opened(client, inc)
    text = await hover_text(client, inc, at(COMMON, "extra", nth=1))
    assert "parameter of type `int`, default `0`" in text  # common.sched alone has no order: as written
    vpp = LIBRARY / "vpp.sched"
    sized = "# ppdsl: --pp 4 -m 4 --param split_backward=true\n" + vpp.read_text(encoding="utf-8")
    assert await opened(client, vpp, sized) == []
    text = await hover_text(client, vpp, at(sized, "split_backward and", offset=2))
    assert "parameter of type `bool`, default `false`; `true` at pp=4 vpp=1 microbatches=4 (directive)" in text


async def test_hover_on_a_function_gives_its_definition(client, project):
    await opened(client, project)
    text = await hover_text(client, project, at(MAIN, "warm(rank)"))
    assert "fn warm(r) = min(pp - r - 1 + extra, microbatches)" in text and "`warm(r: int) -> int`" in text


async def test_hover_on_a_statement_gives_its_jobs_per_rank(client, project):
    await opened(client, project)
    text = await hover_text(client, project, at(MAIN, "backward * warmup", offset=12))
    assert "jobs of this statement at pp=2 vpp=1 microbatches=4 (directive)" in text
    assert "rank 0: 1 job: B3" in text and "rank 1: 0 jobs" in text


async def test_hover_on_a_diagnostic_gives_its_explanation(client):
    case = UI / "deadlock.sched"
    text = case.read_text(encoding="utf-8").replace("# args:", "# ppdsl:", 1)
    (diag,) = await opened(client, case, text)
    hovered = await hover_text(client, case, diag.range.start)
    assert hovered.startswith("**S105**: deadlock: ranks 0 -> 1 -> 0 wait for each other")
    assert "S105: deadlock between ranks (exit status 1)" in hovered  # `ppdsl explain S105`
    assert ">B0<" in hovered  # the grid of where each rank is stuck


@pytest.mark.parametrize("path", sorted(LIBRARY.glob("*.sched")), ids=lambda p: p.stem)
async def test_the_order_statements_hovers_add_up_to_every_ranks_jobs(client, path):
    """On every library schedule with an order: the jobs each top-level statement's hover gives, added up per
    rank, are the rank's jobs as `ppdsl expand` gives them at the checked sizes."""
    text = path.read_text(encoding="utf-8")
    orders = [item for item in parser.parse(text, str(path)).items if isinstance(item, ast.Order)]
    if not orders:
        pytest.skip(f"{path.name} is literal tables: no statements")
    await opened(client, path)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(doc(path)))
    sizes = dict(re.findall(r"(\w+)=(\d+)", lenses[0].command.title.split(":")[0]))
    pp, vpp, m = int(sizes["pp"]), int(sizes["vpp"]), int(sizes["microbatches"])
    counts = [0] * pp
    for stmt in orders[0].body:
        if isinstance(stmt, ast.Let):
            continue
        text_of = await hover_text(client, path, lsp.Position(stmt.span.line - 1, stmt.span.col - 1))
        for rank, n in re.findall(r"^rank (\d+): (\d+) jobs?", text_of, re.M):
            counts[int(rank)] += int(n)
    assert counts == [len(jobs) for jobs in ppdsl.expand(str(path), pp=pp, microbatches=m, vpp=vpp).jobs]


# ------------------------------------------------------------------------------------------------ code lenses


async def test_code_lenses_give_each_ranks_makespan_and_peak(client):
    path = LIBRARY / "1f1b.sched"
    await opened(client, path)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(doc(path)))
    titles = [lens.command.title for lens in lenses]
    report = json.loads(
        CliRunner().invoke(app, ["check", str(path), "--pp", "4", "-m", "8", "--format", "json"]).stdout
    )
    total = report["makespan"]
    assert titles[0] == f"pp=4 vpp=1 microbatches=8 (default): makespan {total:g}, bubble {report['bubble_ratio']:.1%}"
    ends = []
    for title, rank in zip(titles[1:], report["ranks"], strict=True):
        m = re.fullmatch(r"rank (\d+): makespan ([\d.]+), peak ([\d.]+)", title)
        assert m and int(m[1]) == rank["rank"] and float(m[3]) == rank["peak_activations"]
        ends.append(float(m[2]))
    assert max(ends) == total and all(rank["busy"] <= end for end, rank in zip(ends, report["ranks"], strict=True))
    order_line = path.read_text(encoding="utf-8").split("\n").index("order {")
    assert {lens.range.start.line for lens in lenses} == {order_line}


# ------------------------------------------------------------------------------------------------ names


async def test_definition_of_a_param_fn_let_job_and_include(client, project):
    await opened(client, project)
    inc = (project.parent / "common.sched").resolve().as_uri()

    async def definition(pos: lsp.Position) -> lsp.Location:
        found = await client.text_document_definition_async(lsp.DefinitionParams(doc(project), pos))
        assert found is not None
        return found

    fn = await definition(at(MAIN, "warm(rank)"))
    assert (fn.uri, fn.range.start.line, fn.range.start.character) == (inc, 1, 3)
    let = await definition(at(MAIN, "warmup", nth=1))
    assert (let.range.start.line, let.range.start.character) == (7, 8)
    job = await definition(at(MAIN, "recv_forward", nth=1))
    assert (job.range.start.line, job.range.start.character) == (4, 4)
    included = await definition(at(MAIN, "common.sched", offset=1))
    assert included.uri == inc and included.range.start.line == 0
    await opened(client, project.parent / "common.sched")
    param = await client.text_document_definition_async(
        lsp.DefinitionParams(doc(project.parent / "common.sched"), at(COMMON, "extra", nth=1))
    )
    assert (param.range.start.line, param.range.start.character) == (0, 6)


async def test_references_of_a_let_and_a_job_type(client, project):
    await opened(client, project)
    refs = await client.text_document_references_async(
        lsp.ReferenceParams(
            text_document=doc(project),
            position=at(MAIN, "warmup"),
            context=lsp.ReferenceContext(include_declaration=True),
        )
    )
    assert len(refs) == 4  # `let warmup` and its three uses
    jobs = await client.text_document_references_async(
        lsp.ReferenceParams(
            text_document=doc(project),
            position=at(MAIN, "forward backward"),
            context=lsp.ReferenceContext(include_declaration=False),
        )
    )
    # the built-in `forward`: `before forward`, `cost forward` and the two statements (`: forward` is a region)
    uses = [at(MAIN, "before forward", offset=7), at(MAIN, "cost forward", offset=5)]
    uses += [at(MAIN, "recv_forward forward", offset=13), at(MAIN, "recv_forward forward", nth=1, offset=13)]
    assert spots(jobs) == sorted((p.line, p.character) for p in uses)


async def test_rename_of_a_param_edits_the_included_file_too(client, project):
    await opened(client, project)
    inc = project.parent / "common.sched"
    await opened(client, inc)
    edit = await client.text_document_rename_async(lsp.RenameParams(doc(inc), at(COMMON, "extra"), "spare"))
    edits = edit.changes[inc.resolve().as_uri()]
    assert sorted((e.range.start.line, e.range.start.character) for e in edits) == [(0, 6), (1, 30)]
    assert {e.new_text for e in edits} == {"spare"}


async def test_rename_of_a_fn_let_and_job_type(client, project):
    await opened(client, project)
    uri = project.resolve().as_uri()
    inc = (project.parent / "common.sched").resolve().as_uri()

    async def rename(pos: lsp.Position, name: str) -> lsp.WorkspaceEdit:
        return await client.text_document_rename_async(lsp.RenameParams(doc(project), pos, name))

    fn = await rename(at(MAIN, "warm(rank)"), "warmup_of")
    assert len(fn.changes[uri]) == 1 and len(fn.changes[inc]) == 1
    let = await rename(at(MAIN, "warmup", nth=2), "w")
    assert len(let.changes[uri]) == 4
    job = await rename(at(MAIN, "recv_forward"), "receive")
    assert len(job.changes[uri]) == 3  # the declaration and both statements
    prepared = await client.text_document_prepare_rename_async(
        lsp.PrepareRenameParams(doc(project), at(MAIN, "optimizer"))
    )
    assert prepared is None  # a built-in job type is not renamed
    with pytest.raises(Exception, match="not a name"):
        await rename(at(MAIN, "warmup"), "order")


async def test_rename_of_an_included_file_renames_it_and_its_includes(client, project):
    await opened(client, project)
    edit = await client.text_document_rename_async(
        lsp.RenameParams(doc(project), at(MAIN, "common.sched", offset=2), "shared.sched")
    )
    text_edit, file_edit = edit.document_changes
    assert text_edit.edits[0].new_text == "shared.sched"
    assert file_edit.old_uri.endswith("/common.sched") and file_edit.new_uri.endswith("/shared.sched")


# ------------------------------------------------------------------------------------------------ completion, outline


async def test_completion_offers_keywords_job_types_params_and_functions(client, project):
    await opened(client, project)
    found = await client.text_document_completion_async(lsp.CompletionParams(doc(project), at(MAIN, "optimizer")))
    labels = {item.label: item.kind for item in found.items}
    K = lsp.CompletionItemKind
    assert labels["repeat"] == K.Keyword and labels["order"] == K.Keyword
    assert labels["backward_w"] == K.Class and labels["recv_forward"] == K.Class
    assert labels["extra"] == K.Constant
    assert labels["warm"] == K.Function and labels["ceildiv"] == K.Function
    assert labels["microbatches"] == K.Variable and labels["warmup"] == K.Variable


async def test_completion_answers_for_where_the_cursor_is(client, project):
    """The server hands the request's position on: after `memory recompute ` only recompute's verbs come (the
    cases by context: tests/lsp/test_completion.py)."""
    text = MAIN.replace("cost forward = 1.5", "cost forward = 1.5\nmemory recompute keeps 0.2")
    await opened(client, project, text)
    found = await client.text_document_completion_async(lsp.CompletionParams(doc(project), at(text, "keeps")))
    assert [item.label for item in sorted(found.items, key=lambda i: i.sort_text)] == ["keeps", "fraction"]


async def test_document_symbols_are_the_outline(client, project):
    await opened(client, project)
    symbols = await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc(project)))
    assert [s.name for s in symbols] == [
        "schedule mine",
        "include common.sched",
        "job recv_forward",
        "cost forward",
        "order",
    ]
    assert [c.name for c in symbols[-1].children] == ["let warmup"]


# ------------------------------------------------------------------------------------------------ resilience


async def test_features_work_on_a_file_with_a_syntax_error_elsewhere(client, project):
    broken = MAIN.replace("cost forward = 1.5", "cost forward = = 1.5")
    diags = await opened(client, project, broken)
    assert [d.code for d in diags] == ["E001"]
    text = await hover_text(client, project, at(broken, "warm(rank)"))
    assert "fn warm(r)" in text
    found = await client.text_document_definition_async(lsp.DefinitionParams(doc(project), at(broken, "warmup", nth=1)))
    assert found.range.start.line == 7
    symbols = await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc(project)))
    assert "order" in [s.name for s in symbols] and "cost forward" not in [s.name for s in symbols]


async def test_features_work_on_a_file_that_does_not_resolve(client, project):
    unknown = MAIN.replace("backward * warmup", "backwards * warmup")
    assert [d.code for d in await opened(client, project, unknown)] == ["E002"]
    text = await hover_text(client, project, at(unknown, "recv_forward", nth=1))
    assert "job recv_forward (RF)" in text and "- cost: 0 (default)" in text


# ------------------------------------------------------------------------------------------------ formatting


async def test_formatting_is_the_formatters(client, project):
    await opened(client, project)
    edits = await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(doc(project), lsp.FormattingOptions(tab_size=4, insert_spaces=True))
    )
    expected = format_text(MAIN)
    assert (edits[0].new_text if edits else MAIN) == expected


async def test_references_of_an_included_file_are_its_includes(client, project):
    await opened(client, project)
    found = await client.text_document_references_async(
        lsp.ReferenceParams(
            text_document=doc(project),
            position=at(MAIN, "common.sched", offset=3),
            context=lsp.ReferenceContext(include_declaration=True),
        )
    )
    assert [(loc.uri, loc.range.start.line) for loc in found] == [(project.resolve().as_uri(), 3)]


async def test_an_include_of_a_device_or_fifo_is_never_read(client, tmp_path):
    """The index reads includes as the resolver does: a FIFO or a device is refused, not waited on or read."""
    os.mkfifo(tmp_path / "pipe.sched")
    path = tmp_path / "main.sched"
    text = (
        '# ppdsl: --pp 2 -m 4\ninclude "/dev/zero"\ninclude "pipe.sched"\n'
        "order { forward * microbatches backward * microbatches optimizer }\n"
    )
    assert [d.code for d in await opened(client, path, text)] == ["E067", "E067"]
    symbols = await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc(path)))
    assert [s.name for s in symbols] == ["include /dev/zero", "include pipe.sched", "order"]
    hovered = await hover_text(client, path, at(text, "pipe.sched", offset=1))
    assert "pipe.sched" in hovered
