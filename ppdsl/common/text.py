"""Wording shared by messages: counts with correct plurals, and sets of numbers as ranges (`ranks 0-3, 6`)."""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping


def number_text(value: object) -> str:
    """`str(value)`, or the size of an integer too long for Python to print (over 4300 digits)."""
    try:
        return str(value)
    except ValueError:
        return f"<a {value.bit_length()}-bit integer>"


def ascii_number(text: str, max_digits: int = 9) -> int | None:
    """The value of `text` when it is a plain ASCII numeral of at most `max_digits` digits, else None.

    `str.isdigit()` holds for `²` (which `int()` refuses) and `str.isdecimal()` for `٣` (which `int()` reads as 3),
    and `int()` refuses numerals over 4300 digits: a name or variable someone else can plant is read with this."""
    if not (0 < len(text) <= max_digits and text.isascii() and text.isdigit()):
        return None
    return int(text)


def job_label(name: str, short: str, chunk: int, mb: int, vpp: int, per_step: bool = False) -> str:
    """A job's compact name: `F3`, `B0.c1` (chunk 1, with vpp > 1), `recv_forward2`, `optimizer` (a kind that runs
    once a step, `per_step`: its name). `short` is its type's label prefix (PyTorch's letter, else its alias, else its
    name). The one spelling of a label: the language's job types and the runtime's plan specification both call it."""
    if per_step:
        return name
    return f"{short}{number_text(mb)}" + (f".c{chunk}" if vpp > 1 else "")


def plural(noun: str) -> str:
    """`jobs`, `micro-batches`."""
    return noun + ("es" if noun.endswith(("ch", "sh", "s", "x", "z")) else "s")


def count(n: int | float, noun: str, plural_form: str | None = None) -> str:
    """`1 job`, `3 jobs`, `1 activation`, `2.5 activations`, `8 micro-batches`."""
    shown = f"{n:g}" if isinstance(n, float) else f"{n:,}" if abs(n) >= 10_000 else str(n)
    return f"{shown} {noun if n == 1 else plural_form or plural(noun)}"


def ranges(numbers: Iterable[int], limit: int = 8) -> str:
    """`0-3, 6, 8-9`: sorted, runs of consecutive numbers joined; past `limit` runs, `and N more`."""
    values = sorted(set(numbers))
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    more = sum(b - a + 1 for a, b in runs[limit:])
    return ", ".join(shown) + (f" and {more} more" if more else "")


def numbered(noun: str, numbers: Iterable[int], plural_form: str | None = None) -> str:
    """`rank 2`, `ranks 0-3`, `micro-batches 0-7`."""
    values = sorted(set(numbers))
    return f"{noun if len(values) == 1 else plural_form or plural(noun)} {ranges(values)}"


def source_lines(text: str) -> list[str]:
    """The lines of a source text as the parser numbers them: split at `\\n` only. `str.splitlines` also splits
    at U+2028, U+0085, `\\x0b`, `\\x0c`, `\\x1c`-`\\x1e` and `\\r`, which Lark does not count, so a diagnostic
    would quote a line other than the one it names."""
    return text.split("\n")


def escaped(text: str) -> str:
    """`text` with every character that is not printable written as an escape (`\\u202e`, `\\x0b`, `\\n`):
    control characters, line and paragraph separators, direction overrides and other invisible format
    characters. User text printed in a message cannot then reorder, hide or break the lines around it. Tabs
    and spaces stay."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == "\t" else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shortened(text: str, limit: int = 40) -> str:
    """`text`, or its start and `...` when longer than `limit` characters (a 5000-digit cell in a message)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def show(value: object) -> str:
    """A value as the language writes it: `true`, `3`, `0.5` (never Python's `True`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # over Python's 4300-digit limit
            return f"<a {value.bit_length()}-bit integer>"
    return repr(value) if isinstance(value, float) else str(value)


# The terminal's size as the environment states it, read by rich (`COLUMNS`, `LINES`, and `JUPYTER_*` in a notebook),
# typer's help (`TERMINAL_WIDTH`) and `shutil.get_terminal_size`. They read it with `str.isdigit()` and `int()`,
# which take `²` (and raise) or an Arabic-Indic `٣` (3), and they pad lines to whatever width it says: 10^8
# columns hangs `--help`, 10^21 is an OverflowError. No terminal is wider than a thousand columns; below twenty
# nothing fits (rich prints nothing at all at 0).
WIDTH_VARIABLES = ("COLUMNS", "TERMINAL_WIDTH", "JUPYTER_COLUMNS")
HEIGHT_VARIABLES = ("LINES", "JUPYTER_LINES")
MIN_TERMINAL_COLUMNS, MAX_TERMINAL_COLUMNS = 20, 1000
MAX_TERMINAL_LINES = 1000
_MAX_SIZE_DIGITS = 12  # more digits than this is over the cap anyway; int() is not asked to read 5000 of them


def sane_terminal_environment(environ: MutableMapping[str, str]) -> None:
    """Make the terminal size `environ` states one the libraries can use: a width from MIN_TERMINAL_COLUMNS to
    MAX_TERMINAL_COLUMNS, a height from 1 to MAX_TERMINAL_LINES (a larger one capped, a smaller width raised); a
    value that is not a positive number in ASCII digits is dropped, so the real terminal's size (or the default)
    is used instead. The command line calls this before any console is made."""
    for names, low, high in (
        (WIDTH_VARIABLES, MIN_TERMINAL_COLUMNS, MAX_TERMINAL_COLUMNS),
        (HEIGHT_VARIABLES, 1, MAX_TERMINAL_LINES),
    ):
        for name in names:
            raw = environ.get(name)
            if raw is None:
                continue
            text = raw.strip()
            digits = text.lstrip("0")
            if not (text.isascii() and text.isdigit()) or not digits:  # not a number, or zero
                del environ[name]
            else:
                size = high if len(digits) > _MAX_SIZE_DIGITS else min(max(int(digits), low), high)
                environ[name] = str(size)


def terminal_columns(default: int = 80) -> int:
    """The width text should fit: the terminal's, else `COLUMNS`, else `default` (a pipe or a file)."""
    import shutil

    return shutil.get_terminal_size((default, 24)).columns
