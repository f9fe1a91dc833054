"""The front end's bounds: nesting (blocks, loops, expressions, function calls), includes (depth, count, bytes,
kinds of file), and work linear in the length of the file. Each case is a finding of issue 15, reproduced."""

from __future__ import annotations

import os
import time

import pytest

from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.functions import MAX_CALL_DEPTH
from ppdsl.language.includes import MAX_INCLUDE_BYTES, MAX_INCLUDE_DEPTH, MAX_INCLUDES
from ppdsl.language.parser import MAX_BLOCK_DEPTH, MAX_EXPR_DEPTH
from ppdsl.language.resolve import load, resolve_text
from ppdsl.language.typecheck import MAX_LOOP_DEPTH

GPIPE = "order { forward * microbatches backward * microbatches optimizer }"
TAIL = "\nbackward * microbatches optimizer }\n"


def refused(text: str, file: str = "x.sched"):
    """The diagnostics resolving `text` gives (it must fail), asserting no Python error escapes."""
    with pytest.raises(DiagnosticError) as err:
        resolve_text(text, file)
    return err.value.diagnostics


def only(diagnostics, code: str):
    assert [d.code for d in diagnostics] == [code], [(d.code, d.message) for d in diagnostics]
    return diagnostics[0]


# ------------------------------------------------------------------ nesting


def nested_ifs(levels: int) -> str:
    """An order whose `if` blocks nest `levels` deep (with the order's own block: levels + 1), one a line."""
    opens = "".join(f"{'  ' * (i + 1)}if rank >= 0 {{\n" for i in range(levels))
    return "order {\n" + opens + "forward * microbatches\n" + "}" * levels + TAIL


def test_blocks_nested_too_deeply_are_named_at_the_block_past_the_limit():
    assert resolve_text(nested_ifs(MAX_BLOCK_DEPTH - 1))  # the order's block plus 63: the limit, accepted
    d = only(refused(nested_ifs(MAX_BLOCK_DEPTH)), "E065")
    assert d.message == f"blocks are nested too deeply: more than {MAX_BLOCK_DEPTH} levels"
    # line 1 is the order; the 64th `if` is on line 65 and opens block level 65
    assert (d.span.line, d.span.col) == (MAX_BLOCK_DEPTH + 1, 2 * MAX_BLOCK_DEPTH + len("if rank >= 0 ") + 1)


@pytest.mark.parametrize("levels", [300, 3000])
def test_deep_blocks_never_surface_as_a_recursion_error(levels):
    d = only(refused(nested_ifs(levels)), "E065")
    assert d.span.line == MAX_BLOCK_DEPTH + 1


def test_200000_unclosed_braces_answer_at_once():
    text = "order " + "{ repeat 1 " * 200_000 + "\n"
    start = time.perf_counter()
    d = only(refused(text), "E065")
    assert time.perf_counter() - start < 5  # the scan runs before the parser (16 s before, parsed twice)
    assert d.span.line == 1 and d.span.col == len("order ") + len("{ repeat 1 ") * MAX_BLOCK_DEPTH + 1


def test_braces_in_strings_and_comments_open_no_block():
    text = "# " + "{" * 100 + '\nrule "' + "{" * 100 + '" { priority = 1 }\n' + GPIPE
    assert resolve_text(text)


def nested_loops(levels: int, inner: str = "forward") -> str:
    opens = "".join(f"{'  ' * (i + 1)}repeat 1 {{\n" for i in range(levels))
    return "order {\n" + opens + inner + "\n" + "}" * levels + "\nforward * (microbatches - 1)" + TAIL


def test_loops_are_bounded_by_what_python_compiles_and_named_at_the_loop():
    assert resolve_text(nested_loops(MAX_LOOP_DEPTH))
    d = only(refused(nested_loops(MAX_LOOP_DEPTH + 1)), "E065")
    assert d.message == f"loops are nested too deeply: more than {MAX_LOOP_DEPTH} levels"
    assert d.span.line == MAX_LOOP_DEPTH + 2  # the 21st `repeat`, not the order at line 1
    # `forward * n` is a loop of its own
    d = only(refused(nested_loops(MAX_LOOP_DEPTH, "forward * 1")), "E065")
    assert d.span.line == MAX_LOOP_DEPTH + 2


@pytest.mark.parametrize(
    "make",
    [
        lambda n: "+".join(["1"] * (n + 1)),  # n operators, left-nested
        lambda n: "-" * n + "1",
        lambda n: "(" * n + "1" + ")" * n,
        lambda n: "min(" * n + "1" + ", 1)" * n,
    ],
    ids=["sum", "negation", "parentheses", "calls"],
)
@pytest.mark.parametrize("where", ["let", "cost", "fn"])
def test_expressions_are_bounded_and_the_limit_itself_compiles(make, where):
    def schedule(expr: str) -> str:
        if where == "let":
            return f"order {{ let x = {expr}\n forward * microbatches" + TAIL
        if where == "cost":
            return f"cost forward = {expr}\n{GPIPE}"
        return f"fn f() = {expr}\norder {{ let x = f()\n forward * microbatches" + TAIL

    assert resolve_text(schedule(make(MAX_EXPR_DEPTH)))
    d = only(refused(schedule(make(10 * MAX_EXPR_DEPTH))), "E065")
    assert d.message == f"expression nested too deeply: more than {MAX_EXPR_DEPTH} levels"
    assert d.span.line == 1 and d.span.col > 1


@pytest.mark.parametrize("reverse", [False, True], ids=["callees-first", "callers-first"])
def test_a_long_chain_of_functions_is_refused_not_a_recursion_error(reverse):
    fns = ["fn f0() = 1"] + [f"fn f{i}() = f{i - 1}() + 1" for i in range(1, 3000)]
    if reverse:
        fns.reverse()
    text = "\n".join(fns) + "\norder { forward * min(microbatches, f2999())" + TAIL
    d = only(refused(text), "E065")
    assert d.message.startswith(f"functions call each other too deeply: a call of `f{MAX_CALL_DEPTH}`")
    short = "\n".join(fns[:MAX_CALL_DEPTH] if not reverse else fns[-MAX_CALL_DEPTH:])
    assert resolve_text(short + f"\norder {{ forward * min(microbatches, f{MAX_CALL_DEPTH - 1}())" + TAIL)


# ------------------------------------------------------------------ includes


def write(folder, name: str, text: str):
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


def test_an_include_that_is_not_a_sched_file_is_refused_without_quoting_it(tmp_path):
    secret = "root:$6$salt$HASHEDPASSWORD:19000:0:99999:7:::"
    write(tmp_path, "shadow", secret + "\n")
    os.symlink(tmp_path / "shadow", tmp_path / "looks.sched")  # a `.sched` name for it does not help
    for named in ("shadow", "looks.sched"):
        main = write(tmp_path, "main.sched", f'include "{named}"\n{GPIPE}\n')
        with pytest.raises(DiagnosticError) as err:
            load(main)
        d = only(err.value.diagnostics, "E067")
        assert "not a `.sched` file" in d.message
        assert all("HASHED" not in str(x.to_dict()) for x in err.value.diagnostics)


@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
def test_devices_fifos_and_directories_are_refused_at_once(tmp_path, kind):
    if kind == "device":
        named = "/dev/zero"
    elif kind == "fifo":
        os.mkfifo(tmp_path / "pipe.sched")  # opened for reading, this would wait for a writer for ever
        named = "pipe.sched"
    else:
        (tmp_path / "dir.sched").mkdir()
        named = "dir.sched"
    main = write(tmp_path, "main.sched", f'include "{named}"\n{GPIPE}\n')
    start = time.perf_counter()
    with pytest.raises(DiagnosticError) as err:
        load(main)
    assert time.perf_counter() - start < 5
    assert only(err.value.diagnostics, "E067").span.line == 1


def test_a_file_included_many_times_is_read_once(tmp_path):
    """17 files each including the next six times: 6^16 expansions before (past 60 s), 17 reads now."""
    for i in range(17):
        body = "".join(f'include "e{i + 1}.sched"\n' for _ in range(6)) if i < 16 else "cost forward = 3\n"
        write(tmp_path, f"e{i}.sched", body)
    main = write(tmp_path, "main.sched", f'include "e0.sched"\n{GPIPE}\n')
    start = time.perf_counter()
    defn = load(main)
    assert time.perf_counter() - start < 5
    assert len(defn.sources) == 18


def test_a_diamond_of_includes_defines_once(tmp_path):
    write(tmp_path, "common.sched", "cost forward = 3\n")
    write(tmp_path, "a.sched", 'include "common.sched"\n')
    write(tmp_path, "b.sched", 'include "common.sched"\n')  # before: "the cost of `forward` is defined twice"
    assert load(write(tmp_path, "main.sched", f'include "a.sched"\ninclude "b.sched"\n{GPIPE}\n'))


def test_a_deep_chain_of_includes_is_too_deep_not_a_cycle(tmp_path):
    for i in range(40):
        write(tmp_path, f"c{i}.sched", f'include "c{i + 1}.sched"\n' if i < 39 else "cost forward = 3\n")
    with pytest.raises(DiagnosticError) as err:
        load(write(tmp_path, "main.sched", f'include "c0.sched"\n{GPIPE}\n'))
    d = only(err.value.diagnostics, "E066")  # before: "`c15.sched` includes itself"
    assert "nested too deeply" in d.message and f"at most {MAX_INCLUDE_DEPTH}" in d.message
    assert d.notes and d.notes[0].startswith("the chain: main.sched -> c0.sched")
    # the limit itself is accepted
    for i in range(MAX_INCLUDE_DEPTH - 1):
        last = i == MAX_INCLUDE_DEPTH - 2
        write(tmp_path, f"d{i}.sched", "cost forward = 3\n" if last else f'include "d{i + 1}.sched"\n')
    assert load(write(tmp_path, "ok.sched", f'include "d0.sched"\n{GPIPE}\n'))


def test_a_cycle_is_still_a_cycle(tmp_path):
    write(tmp_path, "a.sched", 'include "b.sched"\n' + GPIPE)
    write(tmp_path, "b.sched", 'include "a.sched"\n')
    with pytest.raises(DiagnosticError) as err:
        load(tmp_path / "a.sched")
    assert "includes itself" in only(err.value.diagnostics, "E005").message


def test_include_statements_are_counted(tmp_path):
    for i in range(MAX_INCLUDES + 1):
        write(tmp_path, f"m{i}.sched", f"param p{i} = 1\n")
    main = write(tmp_path, "main.sched", "".join(f'include "m{i}.sched"\n' for i in range(MAX_INCLUDES + 1)) + GPIPE)
    with pytest.raises(DiagnosticError) as err:
        load(main)
    d = only(err.value.diagnostics, "E066")
    assert d.span.line == MAX_INCLUDES + 1 and f"more than {MAX_INCLUDES:,}" in d.message


def test_included_bytes_are_bounded(tmp_path):
    write(tmp_path, "big.sched", "#" * (MAX_INCLUDE_BYTES + 1) + "\n")
    with pytest.raises(DiagnosticError) as err:
        load(write(tmp_path, "main.sched", f'include "big.sched"\n{GPIPE}\n'))
    assert "too large" in only(err.value.diagnostics, "E066").message


# ------------------------------------------------------------------ linear


def lets(n: int) -> str:
    body = ["let a0 = 1", *(f"let a{i} = a{i - 1} + 1" for i in range(1, n))]
    return "param n = 1\norder {\n" + "\n".join(body) + "\nforward * microbatches" + TAIL


def best_of_3(text: str) -> float:
    """The least CPU time of 3 resolutions of `text` (CPU time, not wall time: other processes on the machine
    take the wall clock, not this process's CPU)."""
    times = []
    for _ in range(3):
        start = time.process_time()
        resolve_text(text, "big.sched")
        times.append(time.process_time() - start)
    return min(times)


@pytest.mark.parametrize(
    ("make", "small"), [(lets, 2_500), (lambda n: nested_free_statements(n), 1_250)], ids=["let", "mixed"]
)
def test_resolving_is_linear_in_the_length_of_the_file(make, small):
    """4x the statements take about 4x the time (16x if quadratic, as before: 5k `let`s in 1.4 s, 20k in 14.8 s:
    each statement's source line was found by splitting the whole file, and the collector walked the growing
    heap). Ratios of the best of 3 runs, so that other load on the machine does not decide it."""
    short, long = best_of_3(make(small)), best_of_3(make(4 * small))
    assert long / short < 6, f"{small:,} statements {short:.2f} s, {4 * small:,}: {long:.2f} s"


def nested_free_statements(n: int) -> str:
    """`repeat`, `if`, `for` and job statements, n in all."""
    kinds = [
        "repeat 0 { forward }",
        "if rank == 1000000 { forward }",
        "for i in 0 .. 0 { backward }",
        "let x = rank * 2",
    ]
    return "order {\n" + "\n".join(kinds[i % 4] for i in range(n)) + "\nforward * microbatches" + TAIL
