"""Fuzzing the front end: mangled library files and random bytes give diagnostics, never a Python traceback.

Every case runs what `ppdsl check` runs: `resolve_text` -> `expand` at a few small sizes -> `check_expansion`.
`DiagnosticError` is the only exception allowed to escape; anything else fails the test with the input that
caused it (written to pytest's tmp dir so it can be replayed with `ppdsl check`).

The mutants come from `random.Random(SEED)`, so every run sees the same cases; `hypothesis` adds free-form
token soups on top. A few hundred mutants also go through the real command line (typer's CliRunner).
"""

from __future__ import annotations

import json
import random
import re
import traceback
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.resolve import resolve_text

from paths import LIBRARY

SEED = 20240531
MUTANTS = 5400  # front-end cases; each runs at up to SIZES_PER_CASE sizes
TYPED_MUTANTS = 1500  # mutants that put a condition where a number goes, and the other way round
# The library the 5,400 mutants are drawn from, fixed so that the corpus stays the same as the library grows.
CORPUS = ("1f1b", "dualpipev", "eager1f1b", "fthenb", "interleaved1f1b", "vpp", "zbh1", "zbv", "zbvpp")
# What must never reach a message: Python's values, type and exception names, compiled code's names.
PYTHON_WORDS = re.compile(
    r"\b(True|False|None|NoneType|Traceback)\b|'\w+' object|\b\w+Error\b|\b[vu]_\w|\b_ceildiv\b|<lambda>|<order of|__\w+__"
)
CLI_CASES = 300
SIZES_PER_CASE = 3

# Tokens of a .sched text, whitespace included, so that "".join(tokens(text)) == text.
TOKEN = re.compile(r'"""(?:.|\n)*?"""|"[^"\n]*"|#[^\n]*|\d+\.\d+|\d+|[A-Za-z_]\w*|\.\.|//|==|!=|<=|>=|\s+|.', re.DOTALL)
KEYWORDS = (
    "schedule include param require job placement looped vshape stage cost comm memory allocates frees limit "
    "rule in stream priority attr true false order table when rank let repeat for if elif else and or not then "
    "ops before after receives sends forward backward backward_b backward_w optimizer chunk mb pp vpp "
    "microbatches min max abs ceildiv latency bandwidth F B I W recv_forward send_backward split_backward"
).split()
OPERATORS = '{ } ( ) , : ; = . .. + - * / // % == != < <= > >= " """ #'.split()
NUMBERS = [
    "0",
    "1",
    "2",
    "3",
    "7",
    "-1",
    "-7",
    "0.5",
    "1.0",
    "65535",
    "4097",
    str(2**31),
    str(2**63),
    str(10**30),
    "9" * 400,  # an integer a float cannot hold
    "9" * 400 + ".0",  # a real that overflows to infinity
    "9" * 5000,  # over Python's 4300-digit int() limit
    "3" * 2500 + " * " + "7" * 2500,  # a product too long to print
    "/ 0",
    "// 0",
    "% 0",
    "/ 0.0",
    "- 99999999999",
]
CELLS = ["F0", "B0.c1", "I3.c0", "W0.c9", "F99999999999", "F" + "9" * 5000, "optimizer7", "rank 0:", "rank 99:"]
POOL = KEYWORDS + OPERATORS + NUMBERS + CELLS
MUTATIONS = (
    "delete",
    "duplicate",
    "swap",
    "replace",
    "insert",
    "number",
    "nest",
    "multi",
    "truncate",
    "bytes",
    "splice_bytes",
)


def library_texts(stems: tuple[str, ...] | None = None) -> dict[str, str]:
    """The library's texts (those of `stems` only, if given)."""
    texts = {}
    for path in sorted(LIBRARY.glob("*.sched")):
        if stems is not None and path.stem not in stems:
            continue
        text = path.read_text(encoding="utf-8")
        if path.stem == "zbvpp":
            # 37 kB of table cells: keep the header and the pp <= 2 tables, enough to reach every construct
            text = text[: text.index("table when pp == 3")]
        texts[path.stem] = text
    return texts


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _random_text(rng: random.Random, n: int) -> str:
    return bytes(rng.randrange(256) for _ in range(n)).decode("utf-8", errors="replace")


def _token_edit(rng: random.Random, toks: list[str], kind: str) -> None:
    words = [i for i, t in enumerate(toks) if not t.isspace()]
    if not words:
        toks.append(rng.choice(POOL))
        return
    i = rng.choice(words)
    if kind == "delete":
        del toks[i]
    elif kind == "duplicate":
        toks.insert(i, toks[i] + " ")
    elif kind == "swap":
        j = rng.choice(words)
        toks[i], toks[j] = toks[j], toks[i]
    elif kind == "replace":
        toks[i] = rng.choice(POOL)
    elif kind == "insert":
        toks.insert(i, f" {rng.choice(POOL)} ")
    elif kind == "number":
        numbers = [j for j in words if toks[j].isdigit()]
        toks[rng.choice(numbers) if numbers else i] = rng.choice(NUMBERS)
    elif kind == "nest":
        # deep expressions: Python's parser and compiler have limits of their own (200 parentheses, ...)
        numbers = [j for j in words if toks[j].isdigit()] or [i]
        j = rng.choice(numbers)
        depth = rng.choice([2, 30, 150, 199, 200, 260, 1000, 3000])
        style = rng.randrange(4)
        if style == 0:
            toks[j] = "(" * depth + toks[j] + ")" * depth
        elif style == 1:
            toks[j] = "- " * depth + toks[j]
        elif style == 2:
            toks[j] = "1 + " * depth + toks[j]
        else:
            toks[j] = "min(1, " * depth + toks[j] + ")" * depth


def mutate(rng: random.Random, text: str) -> tuple[str, str]:
    """(mutation kind, mutant) of a library text."""
    kind = rng.choice(MUTATIONS)
    if kind == "truncate":
        return kind, text[: rng.randrange(len(text) + 1)]
    if kind == "bytes":
        return kind, _random_text(rng, rng.randrange(300))
    if kind == "splice_bytes":
        i = rng.randrange(len(text) + 1)
        return kind, text[:i] + _random_text(rng, rng.randint(1, 16)) + text[i:]
    toks = tokens(text)
    for _ in range(rng.randint(2, 6) if kind == "multi" else 1):
        _token_edit(rng, toks, rng.choice(MUTATIONS[:7]) if kind == "multi" else kind)
    return kind, "".join(toks)


def no_python_words(diagnostics) -> None:
    """Every field a person reads is free of Python's own words (`True`, `'float' object`, `ValueError`, ...)."""
    for d in diagnostics:
        for text in (d.message, d.label, d.help, *d.notes):
            found = PYTHON_WORDS.search(text)
            assert found is None, f"Python's `{found.group()}` in [{d.code}] {text!r}"


def front_end(text: str, rng: random.Random, sizes: int = SIZES_PER_CASE, codes: Counter | None = None) -> str:
    """Run a text as `ppdsl check` does at a few random small sizes; the outcome: error codes or `valid`.
    `codes` counts the codes reported."""
    try:
        defn = resolve_text(text, "fuzz.sched")
    except DiagnosticError as err:
        assert err.diagnostics, "a DiagnosticError must carry its diagnostics"
        no_python_words(err.diagnostics)
        if codes is not None:
            codes.update(d.code for d in err.diagnostics)
        return "resolve-error"
    outcome = "expand-error"
    for _ in range(sizes):
        pp, m, vpp = rng.randint(1, 4), rng.randint(1, 8), rng.randint(1, 2)
        try:
            exp = expand(defn, pp, m, vpp)
        except DiagnosticError as err:
            assert err.diagnostics
            no_python_words(err.diagnostics)
            continue
        result = check_expansion(exp, rendezvous=rng.random() < 0.25)
        if result.valid:
            return "valid"
        assert result.errors, "an invalid result must say why"
        no_python_words(result.diagnostics)
        outcome = "invalid"
    return outcome


def _crash_report(tmp_path: Path, crashes: list[tuple[str, str, str, str]]) -> str:
    lines = []
    for n, (case, kind, text, tb) in enumerate(crashes[:5]):
        path = tmp_path / f"crash{n}.sched"
        path.write_text(text, encoding="utf-8")
        lines.append(f"--- {case} ({kind}), input saved to {path}:\n{text[:400]!r}\n{tb}")
    return f"{len(crashes)} inputs raised something other than DiagnosticError:\n" + "\n".join(lines)


def test_the_library_itself_passes_through_the_harness():
    """The mutants start from files that work: each library text is valid at some size the harness tries."""
    for stem, text in library_texts().items():
        defn = resolve_text(text, f"{stem}.sched")
        valid = []
        for pp in range(1, 5):
            for m in range(1, 9):
                for vpp in (1, 2):
                    try:
                        exp = expand(defn, pp, m, vpp)
                    except DiagnosticError:
                        continue
                    valid.append(check_expansion(exp).valid)
        assert any(valid), stem


@pytest.mark.e2e
def test_mutated_library_files_give_diagnostics_not_tracebacks(tmp_path):
    rng = random.Random(SEED)
    corpus = library_texts(CORPUS)
    stems = sorted(corpus)
    crashes: list[tuple[str, str, str, str]] = []
    outcomes: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    cases = 0
    for case in range(MUTANTS):
        stem = rng.choice(stems)
        kind, text = mutate(rng, corpus[stem])
        kinds[kind] += 1
        cases += 1
        try:
            outcomes[front_end(text, rng)] += 1
        except Exception:  # the property under test: nothing but DiagnosticError escapes
            crashes.append((f"case {case} from {stem}", kind, text, traceback.format_exc(limit=-4)))
    assert not crashes, _crash_report(tmp_path, crashes)
    assert cases == MUTANTS >= 5000
    # The fuzzer reaches every stage: parse and name errors, size errors, invalid and valid schedules.
    assert all(outcomes[o] >= 50 for o in ("resolve-error", "expand-error", "invalid", "valid")), outcomes
    assert set(kinds) == set(MUTATIONS), kinds


VOCABULARY = sorted({t for text in library_texts(CORPUS).values() for t in tokens(text) if not t.isspace()} | set(POOL))


@pytest.mark.e2e
@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(words=st.lists(st.sampled_from(VOCABULARY), max_size=60), seed=st.integers(0, 2**16))
def test_token_soup_gives_diagnostics(words, seed):
    """Free-form sequences of the language's own tokens (hypothesis shrinks a failure to a minimal one)."""
    front_end(" ".join(words), random.Random(seed), sizes=2)


@pytest.mark.e2e
@settings(max_examples=200, deadline=None, derandomize=True)
@given(text=st.text(max_size=200))
def test_arbitrary_text_gives_diagnostics(text):
    front_end(text, random.Random(0), sizes=1)


@pytest.mark.e2e
def test_the_command_line_never_shows_a_traceback(tmp_path):
    """`ppdsl check` on mutants: exit 0, 1 or 2 only, no traceback, and --format json is always JSON."""
    rng = random.Random(SEED + 1)
    corpus = library_texts(CORPUS)
    stems = sorted(corpus)
    runner = CliRunner()
    exits: Counter[int] = Counter()
    failures = []
    for case in range(CLI_CASES):
        path = tmp_path / f"case{case}.sched"
        kind, text = mutate(rng, corpus[rng.choice(stems)])
        if rng.random() < 0.05:
            kind = "raw bytes"  # not UTF-8 at all: the reader's error, not a replacement character
            path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))))
        else:
            path.write_text(text, encoding="utf-8")
        pp, m, vpp = rng.randint(1, 4), rng.randint(1, 8), rng.randint(1, 2)
        as_json = rng.random() < 0.5
        args = ["check", str(path), "--pp", str(pp), "-m", str(m), "--vpp", str(vpp)]
        args += ["--format", "json"] if as_json else []
        args += ["--rendezvous"] if rng.random() < 0.2 else []
        result = runner.invoke(app, args)
        exits[result.exit_code] += 1
        problem = None
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            problem = "".join(traceback.format_exception(result.exception))
        elif result.exit_code not in (0, 1, 2):
            problem = f"exit code {result.exit_code}"
        elif "Traceback" in result.output + (result.stderr or ""):
            problem = result.output
        elif as_json:
            problem = _json_report_problem(result.stdout, result.exit_code)
        if problem:
            failures.append((f"cli case {case}: {' '.join(args)}", kind, path.read_text(errors="replace"), problem))
    assert not failures, _crash_report(tmp_path, failures)
    assert sum(exits.values()) == CLI_CASES
    assert exits[2] > 0 and exits[1] > 0, exits


def _json_report_problem(stdout: str, exit_code: int) -> str | None:
    try:
        report = json.loads(stdout)
    except ValueError:
        return f"--format json printed something that is not JSON:\n{stdout[:400]}"
    codes = [d["code"] for d in report["diagnostics"] if d["severity"] == "error"]
    if report["valid"] != (exit_code == 0):
        return f"`valid` is {report['valid']} but the exit code is {exit_code}"
    if exit_code == 2 and not any(c.startswith("E") for c in codes):
        return f"exit code 2 without an E error: {codes}"
    if exit_code == 1 and (not codes or any(c.startswith("E") for c in codes)):
        return f"exit code 1 must mean S errors only: {codes}"
    return None


# ---------------------------------------------------------------------------------------------- typed mutants

CONDITIONS = ["true", "false", "(pp > 1)", "(rank == 0)", "not true", "(microbatches >= pp and vpp == 1)"]
NUMBERS_TYPED = ["1", "0", "pp", "microbatches // 2", "0.5", "(pp / 2)"]
COMPARISONS = {"==", "!=", "<", "<=", ">", ">=", "and", "or"}
ARITHMETIC = {"+", "-", "*", "//", "%", "/"}


def typed_mutate(rng: random.Random, text: str) -> tuple[str, str]:
    """(kind, mutant): a condition where a number goes, a number where a condition goes, or an operator of one
    kind for the other, at one place of a library text."""
    toks = tokens(text)
    kind = rng.choice(("condition_for_number", "number_for_condition", "swap_operator", "not_number", "bool_name"))
    words = [i for i, t in enumerate(toks) if not t.isspace() and not t.startswith(("#", '"'))]
    if kind == "condition_for_number":
        spots = [i for i in words if toks[i].isdigit()]
        if spots:
            toks[rng.choice(spots)] = rng.choice(CONDITIONS)
    elif kind == "number_for_condition":
        # the condition after `if`, `require` or `when`, up to its `{` or `:`
        starts = [i for i in words if toks[i] in ("if", "require", "when", "elif")]
        if starts:
            i = rng.choice(starts) + 1
            j = i
            while j < len(toks) and toks[j] not in ("{", ":", "then"):
                j += 1
            toks[i:j] = [" ", rng.choice(NUMBERS_TYPED), " "]
    elif kind == "swap_operator":
        spots = [i for i in words if toks[i] in COMPARISONS | ARITHMETIC]
        if spots:
            i = rng.choice(spots)
            pool = ARITHMETIC if toks[i] in COMPARISONS else COMPARISONS
            toks[i] = rng.choice(sorted(pool))
    elif kind == "not_number":
        spots = [i for i in words if toks[i].isdigit() or toks[i] in ("pp", "microbatches", "rank", "vpp")]
        if spots:
            i = rng.choice(spots)
            toks[i] = f"(not {toks[i]})"
    else:  # a size or a parameter's name replaced by a condition
        spots = [i for i in words if toks[i] in ("pp", "microbatches", "vpp", "rank", "warmup", "total", "per_round")]
        if spots:
            toks[rng.choice(spots)] = rng.choice(["true", "false"])
    return kind, "".join(toks)


@pytest.mark.e2e
def test_typed_mutants_are_type_errors_without_python_words(tmp_path):
    """Conditions and numbers swapped in the library's own texts: each is caught (mostly as E011, the type error,
    before anything runs), never a traceback, never a word of Python in a message."""
    rng = random.Random(SEED + 2)
    corpus = library_texts()
    stems = sorted(corpus)
    crashes: list[tuple[str, str, str, str]] = []
    codes: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for case in range(TYPED_MUTANTS):
        stem = rng.choice(stems)
        kind, text = typed_mutate(rng, corpus[stem])
        kinds[kind] += 1
        try:
            outcomes[front_end(text, rng, sizes=2, codes=codes)] += 1
        except Exception:
            crashes.append((f"typed case {case} from {stem}", kind, text, traceback.format_exc(limit=-4)))
    assert not crashes, _crash_report(tmp_path, crashes)
    assert sum(kinds.values()) == TYPED_MUTANTS and len(kinds) == 5, kinds
    # most typed mutants are refused by the type checker, before any size is tried
    assert codes["E011"] >= TYPED_MUTANTS // 3, codes
    assert outcomes["resolve-error"] > outcomes["valid"], outcomes


@pytest.mark.parametrize(
    ("schedule", "param", "takes"),
    [
        ("vpp", "split_backward=1", "`true` or `false`"),
        ("vpp", "split_backward=yes", "`true` or `false`"),
        ("tests/codegen/features.sched", "jobs=1.5", "an integer (`int`)"),
        ("tests/codegen/features.sched", "jobs=true", "an integer (`int`)"),
        ("tests/codegen/features.sched", "scale=false", "a real number (`float`)"),
    ],
)
def test_typed_parameters_on_the_command_line_are_usage_errors(schedule, param, takes, in_repo):
    """A `--param` value of the wrong type: exit 2, naming the parameter and its type, in the user's words."""
    result = CliRunner().invoke(app, ["check", schedule, "--pp", "2", "-m", "2", "--vpp", "2", "--param", param])
    assert result.exit_code == 2
    name, _, value = param.partition("=")
    assert f"error[E007]: parameter `{name}` takes {takes}, not `{value}`" in result.stderr
    assert PYTHON_WORDS.search(result.stderr) is None
