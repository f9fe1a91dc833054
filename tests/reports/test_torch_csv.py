"""PyTorch pipelining's compute-only CSV: export, import, and the round trip expand -> torch-csv -> import -> expand."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.checks import used_types
from ppdsl.analysis.expand import expand
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_files
from ppdsl.language.parser import parse
from ppdsl.language.resolve import load, resolve_text
from ppdsl.reports.formats import to_torch_csv, torch_actions
from ppdsl.reports.torch_csv import import_torch_csv, torch_csv_to_sched

from paths import ROOT

# Library schedules and sizes; those with auxiliary jobs (1F1B's recv_forward/send_backward) round-trip their
# compute jobs only, since torch's compute-only format has no place for them.
CASES = [
    ("fthenb", 4, 8, 1),
    ("fthenb", 2, 3, 2),
    ("1f1b", 4, 8, 1),
    ("eager1f1b", 3, 6, 1),
    ("zbh1", 4, 8, 1),
    ("vpp", 4, 8, 2),
    ("vpp", 2, 2, 2),
    ("interleaved1f1b", 4, 8, 2),
    ("interleaved1f1b", 2, 6, 3),
    ("zbv", 4, 8, 2),
    ("dualpipev", 3, 6, 2),
    ("zbvpp", 4, 4, 2),
]


def _lib(stem: str):
    return load(next(p for p in library_files() if p.stem == stem))


@pytest.mark.parametrize(("stem", "pp", "m", "vpp"), CASES)
def test_round_trip_is_identity(stem, pp, m, vpp, tmp_path):
    exp = expand(_lib(stem), pp, m, vpp)
    text = to_torch_csv(exp)
    csv_path = tmp_path / f"{stem}.csv"
    csv_path.write_text(text, newline="")
    imported = resolve_text(torch_csv_to_sched(text, str(csv_path), f"{stem}_imported"), str(tmp_path / "x.sched"))
    again = expand(imported, pp, m, vpp)
    assert torch_actions(again) == torch_actions(exp)
    assert again.stage_of == exp.stage_of
    if not any(not exp.defn.job_types[t].builtin for t in used_types(exp)):
        # no auxiliary jobs: the whole expansion, optimizer included, comes back
        assert [again.job_tuples(r) for r in range(pp)] == [exp.job_tuples(r) for r in range(pp)]
    assert check_expansion(again).valid


def test_torch_csv_layout():
    exp = expand(_lib("fthenb"), 2, 2, 1)
    assert to_torch_csv(exp) == "0F0,0F1,0B0,0B1\r\n1F0,1F1,1B0,1B1\r\n"


def test_imported_v_schedule_keeps_v_placement(tmp_path):
    exp = expand(_lib("zbv"), 2, 4, 2)
    sched = torch_csv_to_sched(to_torch_csv(exp), "zbv.csv", "zbv_imported")
    assert "placement vshape" in sched


def test_idle_cells_and_overlap_actions_import():
    """Idle cells vanish; DualPipeV's overlapped pair becomes its forward then its backward."""
    text = "0F0,,3F0,(0F1;3B0)OVERLAP_F_B\r\n,1F0,2F0\r\n"
    sched = torch_csv_to_sched(text, "t.csv", "t")
    assert "placement vshape" in sched
    assert "rank 0: F0.c0 F0.c1 F1.c0 B0.c1 optimizer" in sched
    assert "rank 1: F0.c0 F0.c1 optimizer" in sched


@pytest.mark.parametrize(
    ("text", "row", "col", "fragment"),
    [
        ("0F0,0X1\n1F0\n", 1, 5, "`0X1` is not a compute action"),
        ("0F0,0[4]0\n1F0\n", 1, 5, "`0[4]0` is not a compute action"),  # a job token, but no torch action
        ("0F0,0B0\n1F0, 1SEND_F0\n", 2, 6, "`1SEND_F0` is not a compute action"),
        ("0F0\n0B0\n", 2, 1, "stage 0 appears on rank 0 and on rank 1"),
        ("", 1, 1, "the CSV has no actions"),
    ],
)
def test_malformed_csv_names_row_and_column(text, row, col, fragment):
    with pytest.raises(DiagnosticError) as err:
        torch_csv_to_sched(text, "bad.csv", "bad")
    diag = err.value.diagnostics[0]
    assert fragment in diag.message
    assert (diag.span.line, diag.span.col) == (row, col)


TORCH = importlib.util.find_spec("torch") is not None


@pytest.mark.e2e
@pytest.mark.skipif(not TORCH, reason="torch is not installed (pip install -e '.[bench]' brings torch 2.13)")
@pytest.mark.parametrize(("stem", "pp", "m", "vpp"), [c for c in CASES if c[0] != "fthenb" or c[3] == 1])
def test_torch_loads_our_csv(stem, pp, m, vpp, tmp_path):
    """torch's own `_load_csv` validates what `ppdsl expand --format torch-csv` writes."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from torch_reference import torch_load_compute_csv

    exp = expand(_lib(stem), pp, m, vpp)
    path = tmp_path / "s.csv"
    path.write_text(to_torch_csv(exp), newline="")
    loaded = torch_load_compute_csv(path, microbatches=m, num_stages=pp * vpp)
    assert [[str(a) for a in row if a is not None] for _, row in sorted(loaded.order.items())] == torch_actions(exp)


# A file name that would end the docstring and the name's string, then write items of its own.
HOSTILE_CSV_NAME = 'ev"il"""\nschedule "pwn"\norder { forward }\nrule "x" { }\n"""\u202e.csv'


def test_quotes_and_docstring_ends_in_the_file_name_stay_text(tmp_path):
    path = tmp_path / HOSTILE_CSV_NAME
    path.write_text("0F0,0F1,0B0,0B1\r\n1F0,1F1,1B0,1B1\r\n", encoding="utf-8")
    text = import_torch_csv(path)
    items = parse(text, "imported.sched").items
    kinds = [type(item).__name__ for item in items]
    assert kinds == ["Docstring", "ScheduleName", "Require", "Require", "Require", "Placement", "Table"]
    defn = resolve_text(text, "imported.sched")
    assert defn.name == path.stem.replace('"', "'").replace("\n", "\\n").replace("\u202e", "\\u202e")
    assert check_expansion(expand(defn, 2, 2, 1)).valid


def test_a_byte_order_mark_at_the_start_is_accepted(tmp_path):
    csv = "0F0,0F1,0B0,0B1\r\n1F0,1F1,1B0,1B1\r\n"
    plain, marked = tmp_path / "t.csv", tmp_path / "bom" / "t.csv"
    marked.parent.mkdir()
    plain.write_text(csv, encoding="utf-8")
    marked.write_bytes(b"\xef\xbb\xbf" + csv.encode("utf-8"))
    assert import_torch_csv(marked) == import_torch_csv(plain)


# ---------------------------------------------------------------- what an import holds (issue 26)


@pytest.mark.e2e
def test_an_import_holds_a_small_multiple_of_the_file():
    """Before: an object (tuple, Span, strings) per action, about 44x the text here and 120x for a 64 MiB file
    (7.5 GB); now two passes over the text and the table written into bytes. Measured around the conversion: the
    bounded read before it is one buffer of the file's size."""
    import tracemalloc

    m, pp = 8000, 4
    rows = [",".join([f"{r}F{i}" for i in range(m)] + [f"{r}B{i}" for i in range(m)]) for r in range(pp)]
    text = "\r\n".join(rows) + "\r\n"
    assert len(text) > 400_000
    tracemalloc.start()
    try:
        sched = torch_csv_to_sched(text, "big.csv", "big")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 6 * len(text), f"{peak} bytes at the peak for a {len(text)}-character CSV"
    assert sched.count("\n    rank ") == pp and "rank 3: F0 F1 F2 " in sched and f"B{m - 1} optimizer\n" in sched
    defn = resolve_text(sched, "big.sched")
    assert defn.name == "big"


def test_many_rows_or_a_huge_stage_number_are_refused_not_held():
    with pytest.raises(DiagnosticError) as err:
        torch_csv_to_sched("0F0\n" * 10_000, "rows.csv", "rows")
    assert "more than the 4096 ranks ppdsl imports" in err.value.diagnostics[0].message
    with pytest.raises(DiagnosticError) as err:
        torch_csv_to_sched("0F0,123456789F0\n", "stage.csv", "stage")
    diag = err.value.diagnostics[0]
    assert "`123456789F0` names stage 123456789" in diag.message and (diag.span.line, diag.span.col) == (1, 5)


def test_a_file_of_bad_cells_gives_a_bounded_list_of_diagnostics():
    with pytest.raises(DiagnosticError) as err:
        torch_csv_to_sched(",".join(["0X1"] * 100_000) + "\n", "bad.csv", "bad")
    diags = err.value.diagnostics
    assert len(diags) == 20 and [d.span.col for d in diags[:3]] == [1, 5, 9]
