"""The package's import graph has no circle and no arrow back up: computed here from its own modules' source (every import,
also those inside functions), so a new circle fails this test, with the modules that form it. A package's
``__init__`` (which re-exports its modules) is the module ``from package import name`` names, not a parent
every submodule import passes through."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pos_geometry"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _targets(module: str, path: Path, node: ast.AST, modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        assert isinstance(node, ast.ImportFrom)
        if node.level:
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        # ``from package import submodule`` is an arrow to the submodule; ``from module import name`` to the module
        names = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
        ]
    out = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module and name != "pos_geometry":  # the package's front door imports everything
            out.append(name)
    return out


def import_graph() -> dict[str, set[str]]:
    """``module -> modules it imports`` (within the package)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[name].update(_targets(name, path, node, modules))
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
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
                    found.append(sorted(component))
    return found


# The floors of the package, lowest first: a module imports only from its own floor or a lower one. The
# layout reads like the data flow: the data type, then the tables that are built and the architectures that
# are described, then the readers, the loaders, the analyses of a table, the model-level views (hidden
# states, the attention atlas, interventions), sweeps over many checkpoints, figures, the reproduction, the CLI.
FLOORS: tuple[tuple[str, ...], ...] = (
    (
        "errors",
        "_describe",
        "_escape",
        "_config_values",
        "_json",
        "_limits",
        "_names",
        "_dtypes",
        "_device",
        "_files",
        "_disk_memo",
        "_version",
        "_progress",
        "_threads",
        "_multiple",
    ),
    ("provenance", "embedding"),
    ("encodings",),
    ("registry",),
    ("sources",),
    ("_name_targets", "_record_tables", "loading", "reference"),
    ("analysis",),
    ("hidden",),
    ("atlas",),
    ("interventions",),
    ("sweeps",),
    ("plotting",),
    ("reproduction",),
    ("cards",),
    ("comparison",),
    ("cli", "__main__"),
)


def floor_of(module: str) -> int:
    room = module.split(".")[1]
    for level, rooms in enumerate(FLOORS):
        if room in rooms:
            return level
    raise AssertionError(f"{module}: its room {room!r} has no floor in FLOORS; add it where it belongs")


def upward_arrows(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(importer, imported)`` for every import from a lower floor to a higher one (the front door,
    ``pos_geometry/__init__.py``, stands above every floor)."""
    return sorted(
        (a, b)
        for a, targets in graph.items()
        if a != "pos_geometry"
        for b in targets
        if floor_of(b) > floor_of(a)
    )


def test_every_room_has_a_floor_and_no_import_runs_back_up():
    graph = import_graph()
    assert upward_arrows(graph) == []


def test_the_floor_check_finds_an_arrow_up():
    graph = {"pos_geometry.sources.local": {"pos_geometry.analysis.pca", "pos_geometry.errors"}}
    assert upward_arrows(graph) == [("pos_geometry.sources.local", "pos_geometry.analysis.pca")]


def test_the_package_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 100 and "pos_geometry.sources.opening" in graph["pos_geometry.atlas.rotary"]
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
