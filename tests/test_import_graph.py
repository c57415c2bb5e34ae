"""The project's own import graph has no cycles (type-checking-only imports aside), counting
imports inside functions too: the graph the code shows is the one it runs."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "extractors", "storage")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def _imports(tree: ast.AST, mods: dict[str, Path]):
    """(module names) imported anywhere, except under ``if TYPE_CHECKING:``; ``from pkg import
    sub`` counts as importing ``pkg.sub`` when that is a module."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                yield sub if sub in mods else node.module
        else:
            yield from _imports(node, mods)


def import_graph() -> dict[str, set[str]]:
    mods = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for m, f in mods.items():
        targets = {resolve(n) for n in _imports(ast.parse(f.read_text(encoding="utf-8")), mods)}
        graph[m] = {t for t in targets if t and t != m}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# ---------------------------------------------------------------------------------- SQL lives in storage/
def sqlalchemy_imports(source: str) -> list[int]:
    """Line numbers of every import of SQLAlchemy in ``source``, wherever it sits (module level,
    in a function, under ``if TYPE_CHECKING:``), ``importlib.import_module("sqlalchemy...")`` and
    ``__import__`` included."""

    def names(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            return [node.module]
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                return [node.args[0].value]
        return []

    return sorted(node.lineno for node in ast.walk(ast.parse(source))
                  if any(n == "sqlalchemy" or n.startswith("sqlalchemy.") for n in names(node)))


def test_nothing_in_bot_imports_sqlalchemy():
    """Every query lives in storage/ (returning typed records); bot/ holds no SQL."""
    found = {str(f.relative_to(ROOT)): lines for f in sorted((ROOT / "bot").rglob("*.py"))
             if (lines := sqlalchemy_imports(f.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_sqlalchemy_finder_finds_every_kind_of_import():
    src = ("import os\nimport sqlalchemy as sa\nfrom sqlalchemy.exc import OperationalError\n"
           "def f():\n    from sqlalchemy import select\n    import importlib\n"
           "    importlib.import_module('sqlalchemy.dialects.sqlite')\n    __import__('sqlalchemy')\n"
           "if TYPE_CHECKING:\n    from sqlalchemy.engine import Engine\n"
           "from storage.store import Store\nimport sqlalchemy_utils\n")
    assert sqlalchemy_imports(src) == [2, 3, 5, 7, 8, 10]
