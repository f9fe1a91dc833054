"""`ppdsl lsp`'s diagnostics, through a real client over stdio: those of `ppdsl check` on every UI case, none on
the library at the default sizes, the sizes from a directive, the settings or the default, a deadlock's cycle as
related locations, and updates on every change."""

from __future__ import annotations

import json
import shlex

import pytest
from conftest import SERVER, Editor, start
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient
from typer.testing import CliRunner

from ppdsl.cli import app

from paths import LIBRARY, UI

pytestmark = pytest.mark.asyncio(loop_scope="module")
CASES = sorted(UI.glob("*.sched"))
LIBRARY_FILES = sorted(LIBRARY.glob("*.sched"))


def lsp_text(case) -> str:
    """A UI case as the editor checks it: its `# args:` line (the sizes `ppdsl check` is given) written as the
    server's directive, on the same line, so every other line and column is the file's."""
    text = case.read_text(encoding="utf-8")
    assert text.startswith("# args:")
    return "# ppdsl:" + text[len("# args:") :]


def check_json(case) -> list[dict]:
    args = shlex.split(case.read_text(encoding="utf-8").splitlines()[0][len("# args:") :])
    result = CliRunner().invoke(app, ["check", str(case), *args, "--format", "json"])
    return json.loads(result.stdout)["diagnostics"]


def located(d: lsp.Diagnostic) -> tuple:
    r = d.range
    return (d.code, r.start.line + 1, r.start.character + 1, r.end.line + 1, r.end.character + 1)


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
async def test_ui_case_diagnostics_are_ppdsl_checks(client: LanguageClient, case):
    expected = check_json(case)
    got = await Editor(client).open(case, lsp_text(case))
    assert expected, "every UI case reports something"
    assert len(got) == len(expected)
    for lsp_diag, diag in zip(got, expected, strict=True):
        if diag["line"] is None:  # a command-line value: shown on the directive's line
            assert lsp_diag.code == diag["code"] and lsp_diag.range.start.line == 0
        else:
            assert located(lsp_diag) == (diag["code"], diag["line"], diag["col"], diag["end_line"], diag["end_col"])
        assert lsp_diag.message.startswith(diag["message"])
        if diag["help"]:
            assert lsp_diag.message.endswith(f"help: {diag['help']}")
        assert lsp_diag.data["help"] == diag["help"] and lsp_diag.source == "ppdsl"
        # a hover on it gives its `ppdsl explain` text
        hover = await client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(case.resolve().as_uri()), lsp_diag.range.start)
        )
        assert f"{diag['code']}: " in hover.contents.value and "(exit status " in hover.contents.value


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=[p.stem for p in LIBRARY_FILES])
async def test_library_schedules_check_clean_at_the_default_sizes(client: LanguageClient, path):
    assert await Editor(client).open(path) == []


async def test_deadlock_names_every_rank_of_the_cycle_at_its_waiting_statement(client: LanguageClient):
    case = UI / "deadlock.sched"
    (diag,) = await Editor(client).open(case, lsp_text(case))
    assert diag.code == "S105"
    related = diag.related_information
    assert [r.message for r in related] == [
        "rank 0 at step 1 (`B0`) waits for `B0` from rank 1",
        "rank 1 at step 1 (`F1`) waits for `F1` from rank 0",
    ]
    # rank 0 waits in `backward` of line 5; rank 1 in `forward * microbatches` of line 7
    assert [(r.location.range.start.line + 1, r.location.range.start.character + 1) for r in related] == [
        (5, 39),
        (7, 9),
    ]
    assert all(r.location.uri == case.resolve().as_uri() for r in related)


async def test_diagnostics_follow_every_change(client: LanguageClient, tmp_path):
    path = tmp_path / "mine.sched"
    editor = Editor(client)
    good = "# ppdsl: --pp 2 -m 4\norder { forward * microbatches backward * microbatches optimizer }\n"
    assert await editor.open(path, good) == []
    broken = await editor.change(path, good.replace("optimizer", "optimizr"))
    assert [d.code for d in broken] == ["E002"]
    assert broken[0].range.start.line == 1
    assert await editor.change(path, good) == []


async def test_directive_sizes_are_checked_and_a_bad_directive_is_e098(client: LanguageClient, tmp_path):
    path = tmp_path / "sized.sched"
    editor = Editor(client)
    body = 'require pp == 3 : "three ranks"\norder { forward * microbatches backward * microbatches optimizer }\n'
    assert [d.code for d in await editor.open(path, body)] == ["S100"]  # the default pp is 4
    assert await editor.change(path, "# ppdsl: --pp 3 -m 6\n" + body) == []
    bad = await editor.change(path, "# ppdsl: --pp three -m 6\n" + body)
    assert [d.code for d in bad] == ["E098", "S100"]  # and the file is still checked, at the default
    assert bad[0].range.start.line == 0 and "`--pp` must be an integer" in bad[0].message
    unknown = await editor.change(path, "# ppdsl: --pp 3 -m 6 --frobnicate\n" + body)
    assert [d.code for d in unknown] == ["E098", "S100"] and "--frobnicate" in unknown[0].message


async def test_syntax_and_name_errors_come_as_ppdsl_check_gives_them(client: LanguageClient, tmp_path):
    path = tmp_path / "two.sched"
    text = "# ppdsl: --pp 2 -m 4\norder {\n    forward *\n    backward * microbatches\n    optimizer\n}\n"
    got = await Editor(client).open(path, text)
    path.write_text(text, encoding="utf-8")
    expected = CliRunner().invoke(app, ["check", str(path), "--pp", "2", "-m", "4", "--format", "json"])
    want = json.loads(expected.stdout)["diagnostics"]
    assert [located(d) for d in got] == [(d["code"], d["line"], d["col"], d["end_line"], d["end_col"]) for d in want]


async def test_a_closed_document_has_its_diagnostics_cleared(client: LanguageClient, tmp_path):
    path = tmp_path / "closed.sched"
    editor = Editor(client)
    assert await editor.open(path, "order { nothing }\n")
    client.diagnostics.pop(path.resolve().as_uri(), None)
    editor.close(path)
    assert await editor.diagnostics(path.resolve().as_uri()) == []


SETTINGS = {"ppdsl": {"pp": 3, "microbatches": 6}}


async def test_workspace_settings_give_the_sizes_when_the_file_has_no_directive(tmp_path):
    config = ClientServerConfig(server_command=SERVER)
    lsp_client = await config.start()
    try:
        await start(lsp_client, SETTINGS)
        path = tmp_path / "three.sched"
        body = 'require pp == 3 : "three ranks"\norder { forward * microbatches backward * microbatches optimizer }\n'
        editor = Editor(lsp_client)
        assert await editor.open(path, body) == []
        lenses = await lsp_client.text_document_code_lens_async(
            lsp.CodeLensParams(lsp.TextDocumentIdentifier(path.resolve().as_uri()))
        )
        assert lenses[0].command.title.startswith("pp=3 vpp=1 microbatches=6 (settings)")
        # a change of the settings checks the open documents again
        lsp_client.diagnostics.pop(path.resolve().as_uri(), None)
        lsp_client.workspace_did_change_configuration(
            lsp.DidChangeConfigurationParams({"ppdsl": {"pp": 2, "microbatches": 4}})
        )
        assert [d.code for d in await editor.diagnostics(path.resolve().as_uri())] == ["S100"]
        await lsp_client.shutdown_session()
    finally:
        await lsp_client.stop()


async def test_a_broken_included_file_is_reported_at_its_include(client: LanguageClient, tmp_path):
    (tmp_path / "costs.sched").write_text("cost forward = = 1\n", encoding="utf-8")
    path = tmp_path / "main.sched"
    text = '# ppdsl: --pp 2 -m 4\n\ninclude "costs.sched"\norder { forward * microbatches backward * microbatches optimizer }\n'
    (diag,) = await Editor(client).open(path, text)
    assert diag.code == "E001" and diag.range.start.line == 2  # the include line
    (where,) = diag.related_information
    assert where.location.uri == (tmp_path / "costs.sched").resolve().as_uri()
    assert (where.location.range.start.line, where.location.range.start.character) == (0, 15)


async def test_ranges_count_utf16_code_units(client: LanguageClient, tmp_path):
    """An editor counts columns in UTF-16 (VS Code): an emoji before a name on its line takes two."""
    path = tmp_path / "wide.sched"
    line = 'require pp > 0 : "\U0001f600"  require b > 0 : "y"'
    text = f"# ppdsl: --pp 2 -m 4\n{line}\norder {{ forward * microbatches backward * microbatches optimizer }}\n"
    (diag,) = await Editor(client).open(path, text)
    assert diag.code == "E002" and "`b`" in diag.message
    at = line.index(" b ") + 1  # in characters; the emoji before it is two UTF-16 code units
    assert (diag.range.start.line, diag.range.start.character, diag.range.end.character) == (1, at + 1, at + 2)


async def test_the_clients_workspace_configuration_gives_the_sizes(tmp_path):
    """VS Code answers `workspace/configuration` for the `ppdsl` section; the server asks once initialized."""
    lsp_client = await ClientServerConfig(server_command=SERVER).start()
    try:
        lsp_client.set_configuration({"ppdsl": {"pp": 3, "microbatches": 6, "vpp": 1}})
        await start(lsp_client)
        path = tmp_path / "three.sched"
        body = 'require pp == 3 : "three ranks"\norder { forward * microbatches backward * microbatches optimizer }\n'
        editor = Editor(lsp_client)
        uri = path.resolve().as_uri()
        diagnostics = await editor.open(path, body)
        if diagnostics:  # checked before the client's answer came: the answer checks it again
            lsp_client.diagnostics.pop(uri, None)
            diagnostics = await editor.diagnostics(uri)
        assert diagnostics == []
        await lsp_client.shutdown_session()
    finally:
        await lsp_client.stop()


async def test_a_null_configuration_change_asks_the_client_again(tmp_path):
    """VS Code's pull model sends `didChangeConfiguration` with `settings: null`: the server asks for them."""
    lsp_client = await ClientServerConfig(server_command=SERVER).start()
    try:
        await start(lsp_client)
        path = tmp_path / "three.sched"
        body = 'require pp == 3 : "three ranks"\norder { forward * microbatches backward * microbatches optimizer }\n'
        editor = Editor(lsp_client)
        uri = path.resolve().as_uri()
        assert [d.code for d in await editor.open(path, body)] == ["S100"]  # the default pp is 4
        lsp_client.set_configuration({"ppdsl": {"ppdsl.pp": 3, "ppdsl.microbatches": 6}})
        lsp_client.diagnostics.pop(uri, None)
        lsp_client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(None))
        assert await editor.diagnostics(uri) == []
        await lsp_client.shutdown_session()
    finally:
        await lsp_client.stop()
