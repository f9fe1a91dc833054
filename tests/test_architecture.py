"""The layers of docs/architecture.md, as import-linter contracts in pyproject.toml: they hold, and a back-edge
breaks them. And inside the layers: no import cycle between modules, counting every import statement (those inside
functions and under `TYPE_CHECKING` too, which import-linter's layers do not forbid within a layer), and no private
name imported from another module."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from paths import ROOT


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the package under `root`, before any installed one
    cmd = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"]
    return subprocess.run(
        [*cmd, "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_layer_imports_only_the_layers_below_it():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_a_back_edge_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "ppdsl", tmp_path / "ppdsl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "ppdsl" / "analysis" / "grid.py", "a") as f:
        f.write("\nfrom ppdsl.reports import trace  # a back-edge: analysis reaching up into reports\n")
    with open(tmp_path / "ppdsl" / "language" / "ir.py", "a") as f:
        f.write("\nimport paddle  # the front end importing paddle\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "1 kept, 2 broken" in result.stdout
    assert "ppdsl.analysis.grid -> ppdsl.reports.trace" in result.stdout
    assert "ppdsl.language.ir -> paddle" in result.stdout


# ------------------------------------------------------------------------------------ the module import graph

# Private names imported across modules that are being removed (none left: synth's engines import
# cpsat.integer_scale); an entry would say who removes it and when.
PRIVATE_IMPORTS_ALLOWED: set[tuple[str, str, str]] = set()


def _modules(root: Path, package: str = "ppdsl") -> dict[str, Path]:
    """Dotted module name -> file, for every module of `package` under `root` (a package is its __init__)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: Path, package: str = "ppdsl") -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """Every import statement of every module, wherever it stands: module -> the package modules it imports
    (`from a import b` is module `a.b` when that is a module, else `a`), and (importer, module, name) for each
    private name (`_x`, not a dunder) imported by `from module import _x` from another module."""
    modules = _modules(root, package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    private = []
    for name, path in modules.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name
                    while target and target not in modules:
                        target = target.rpartition(".")[0]
                    if target:
                        graph[name].add(target)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                if base != package and not base.startswith(package + "."):
                    continue
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    if submodule in modules:
                        graph[name].add(submodule)
                        continue
                    graph[name].add(base)
                    if alias.name.startswith("_") and not alias.name.endswith("__") and base != name:
                        private.append((name, base, alias.name))
        graph[name].discard(name)
    return graph, private


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_module_imports_itself_through_others():
    graph, _ = import_graph(ROOT)
    assert len(graph) > 50 and graph["ppdsl.analysis.check"]  # the whole package was read
    assert import_cycles(graph) == []
    # check builds on scenario (check(scenario)); scenario knows nothing of the check
    assert "ppdsl.analysis.scenario" in graph["ppdsl.analysis.check"]
    assert "ppdsl.analysis.check" not in graph["ppdsl.analysis.scenario"]


def test_no_private_name_is_imported_from_another_module():
    _, private = import_graph(ROOT)
    assert set(private) <= PRIVATE_IMPORTS_ALLOWED, sorted(set(private) - PRIVATE_IMPORTS_ALLOWED)


def test_the_graph_sees_imports_inside_functions_and_private_names(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def later():\n    from ..a import _hidden  # a cycle, inside a function\n")
    (package / "sub" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n")
    graph, private = import_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"} and graph["pkg.sub.c"] == {"pkg.a"}
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b"]]
    assert private == [("pkg.sub.b", "pkg.a", "_hidden")]
