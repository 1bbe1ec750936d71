"""The import graph of the project's own modules: no cycle, no arrow up the layers.

Every import counts, function-level and by name (``importlib``) included (see
``tests/project/test_layers.py``). A cycle made a module impossible to read alone: ``dsp_side.core_main ->
core -> fwproc -> fwtemplate -> core_main`` was the last, until one process starter
(``vdsp_board.processes.starter``) took entry points from the layers above it instead of importing them.
``python -m tests.project.test_import_graph`` prints the counts (modules, arrows, cycles, upward arrows).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.project.test_layers import ALLOWED, OURS, ROOT, first_party_imports, layer_of


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> its file, for every first-party module (packages by their ``__init__``)."""
    found = {}
    for package in OURS:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            if "firmware_src" in parts or "__pycache__" in parts:     # image sources, not modules of ours
                continue
            found[".".join(parts)] = path
    return found


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the first-party modules it imports (a name that is not a module, such as
    ``from pkg import function``, counts as its package; a package's own ``__init__`` is no arrow)."""
    mods = modules(root)
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for imported in first_party_imports(path, package):
            while imported and imported not in mods:
                imported = imported.rpartition(".")[0]
            if imported and imported != name and not name.startswith(imported + "."):
                targets.add(imported)
        edges[name] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
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
                    work.append((child, iter(sorted(edges.get(child, ())))))
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
                    found.append(sorted(component))
    return found


def upward(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                  if layer_of(a) in ALLOWED and layer_of(b) not in ALLOWED[layer_of(a)])


def counts(root: Path = ROOT) -> dict[str, int]:
    edges = graph(root)
    return {"modules": len(edges), "arrows": sum(len(t) for t in edges.values()),
            "cycles": len(cycles(edges)), "upward arrows": len(upward(edges))}


@pytest.fixture(scope="module")
def checkout_graph() -> dict[str, set[str]]:
    """The checkout's graph, made once for the two checks that read it (each file parsed once)."""
    return graph()


def test_no_module_imports_itself_through_others(checkout_graph):
    assert cycles(checkout_graph) == []


def test_no_arrow_goes_up_the_layers(checkout_graph):
    assert upward(checkout_graph) == []


def test_the_cycle_check_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert cycles(edges) == [["a", "b", "c"]]


def test_the_graph_sees_late_and_by_name_imports(tmp_path):
    for package in OURS:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "dsp_side" / "a.py").write_text("def f():\n    from dsp_side import b\n")
    (tmp_path / "dsp_side" / "b.py").write_text("import importlib\nimportlib.import_module('dsp_side.a')\n"
                                                "importlib.import_module('relay_server.main')\n")
    (tmp_path / "relay_server" / "main.py").write_text("")
    edges = graph(tmp_path)
    assert cycles(edges) == [["dsp_side.a", "dsp_side.b"]]
    assert upward(edges) == ["dsp_side.b -> relay_server.main"]


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    print(counts(root))
    for cycle in cycles(graph(root)):
        print("cycle:", " <-> ".join(cycle))
    for arrow in upward(graph(root)):
        print("upward:", arrow)
