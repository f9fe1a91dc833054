"""No function of the package is 120 lines or more: a function that long does several things, each of which
deserves a name (issue 27). Functions that other branches are splitting are listed, with who splits them; the
list only shrinks."""

from __future__ import annotations

import ast

from paths import ROOT

LIMIT = 120
# Being split on other branches (issue 27: the synth driver, the runtime's plan vocabulary); empty when merged.
ALLOWED: set[str] = set()  # (empty: every function is under the limit)


def _walk(node: ast.AST, where: str, out: dict[str, int]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            out[f"{where}{child.name}"] = child.end_lineno - child.lineno + 1
            _walk(child, f"{where}{child.name}.", out)
        elif isinstance(child, ast.ClassDef):
            _walk(child, f"{where}{child.name}.", out)
        else:
            _walk(child, where, out)


def function_lengths(root=ROOT, package: str = "ppdsl") -> dict[str, int]:
    """`path:Class.function` -> its lines, from its `def` to its last line, for every function of `package`
    (methods and nested functions too)."""
    out: dict[str, int] = {}
    for path in sorted((root / package).rglob("*.py")):
        name = path.relative_to(root).as_posix()
        _walk(ast.parse(path.read_text(encoding="utf-8"), name), f"{name}:", out)
    return out


def test_no_function_is_120_lines_or_more():
    lengths = function_lengths()
    assert len(lengths) > 500 and "ppdsl/analysis/execution.py:execute" in lengths  # the whole package was read
    long = {f"{name} ({n} lines)" for name, n in lengths.items() if n >= LIMIT and name not in ALLOWED}
    assert not long, f"split these where a name explains the part: {sorted(long)}"


def test_the_allow_list_names_only_long_functions_that_exist():
    """A function split (or renamed) leaves the list, so the list cannot hide a new long function later."""
    lengths = function_lengths()
    stale = {name for name in ALLOWED if lengths.get(name, 0) < LIMIT}
    assert not stale, f"no longer {LIMIT} lines or more: remove from ALLOWED {sorted(stale)}"


def test_the_count_sees_methods_and_nested_functions(tmp_path):
    (tmp_path / "pkg").mkdir()
    body = "\n".join(f"        x{i} = {i}" for i in range(3))
    (tmp_path / "pkg" / "m.py").write_text(f"class A:\n    def f(self):\n        def g():\n            pass\n{body}\n")
    assert function_lengths(tmp_path, "pkg") == {"pkg/m.py:A.f": 6, "pkg/m.py:A.f.g": 2}
