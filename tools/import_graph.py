"""Print the import graph of akk/: modules, packages, imports, cycles, back-edges, largest modules.

    python tools/import_graph.py [--root DIR] [--json]

``--root`` is the package directory to read (default: this checkout's akk/),
so an older checkout can be measured the same way. Every import statement
counts, wherever it stands (a function body, a TYPE_CHECKING block): each is a
dependency a reader has to follow. A module's folder is its package (akk/ for
a top-level module). Layers come from LAYERS below, lowest first: an import of
a module in a higher layer than the importer's is a back-edge. Stdlib only.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypedDict

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("shared", ("akk", "akk.faults", "akk.client", "akk.text_rule", "akk.workspace_roots")),
    ("runtime", ("akk.runtime",)),
    ("screen", ("akk.screen",)),
    ("tmux", ("akk.tmux",)),
    ("discovery", ("akk.discovery",)),
    ("evidence", ("akk.evidence",)),
    ("sessions", ("akk.sessions",)),
    ("store", ("akk.store",)),
    ("profiles", ("akk.profiles",)),
    ("protocol", ("akk.protocol",)),
    ("actors", ("akk.actors",)),
    ("backends", ("akk.backends",)),
    ("config", ("akk.config",)),
    ("methods", ("akk.methods",)),
    ("server", ("akk.server",)),
    ("qualify", ("akk.qualify",)),
    ("service", ("akk.service",)),
    ("cli", ("akk.cli", "akk.mcp", "akk.__main__")),
)
"""Layers, lowest first, each with the module prefixes it holds (the longest prefix wins).

The design's order: the shared actors (the one writer, the outbox, the one TurnActor,
the board) under the backends that run Turns on them, the methods over the backends'
contract, the endpoint hosting the methods, `akk qualify` beside them, the service
assembling it all. A prefix
holds its modules and everything below it; the bare package name (`akk`) holds only
its own ``__init__``. A module no prefix holds is at the top level (TOP_LEVEL).
"""

TOP_LEVEL = "service"
"""The layer of a module that no prefix in LAYERS holds."""

LARGEST = 10
"""How many of the largest modules are printed."""


class BackEdge(TypedDict):
    source: str
    target: str
    layers: list[str]


class Size(TypedDict):
    module: str
    lines: int


class Measurement(TypedDict):
    """What `measure` finds; `--json` prints it as it is."""

    root: str
    modules: int
    packages: int
    top_level_modules: int
    imports: int
    package_imports: int
    layers: list[str]
    back_edges: list[BackEdge]
    module_cycles: list[list[str]]
    package_cycles: list[list[str]]
    folder_cycles: list[list[str]]
    largest: list[Size]


def module_name(root: Path, path: Path) -> str:
    """The dotted name of the module at ``path`` in the package at ``root``."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root`` by dotted name."""
    return {module_name(root, path): path for path in sorted(root.rglob("*.py"))}


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The modules of the package that module ``name`` imports (itself excluded)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, is_package, node.module, node.level)
            for alias in node.names:
                found.add(_known(f"{base}.{alias.name}", modules))
    found.discard("")
    found.discard(name)
    return found


def _absolute(name: str, is_package: bool, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    parts = name.split(".")
    keep = len(parts) - level + (1 if is_package else 0)
    base = ".".join(parts[:keep])
    return f"{base}.{module}" if module else base


def _known(dotted: str, modules: Mapping[str, Path]) -> str:
    """The longest prefix of ``dotted`` that is a module of the package ("" if none is)."""
    parts = dotted.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return ""


def package_of(name: str, modules: Mapping[str, Path]) -> str:
    """The folder a module lives in: itself for a package's __init__, else its parent."""
    if modules[name].name == "__init__.py":
        return name
    return name.rpartition(".")[0] or name


def layer_of(name: str) -> int:
    """The index in LAYERS of the layer ``name`` belongs to (longest matching prefix)."""
    best = next(i for i, (layer, _) in enumerate(LAYERS) if layer == TOP_LEVEL)
    best_length = -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            below = "." in prefix and name.startswith(prefix + ".")
            if (name == prefix or below) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    return best


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
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

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def measure(root: Path) -> Measurement:
    """Every number this tool prints, for the package at ``root``."""
    modules = read_modules(root)
    graph = {name: sorted(imports_of(name, path, modules)) for name, path in modules.items()}
    packages = sorted({package_of(name, modules) for name in modules})
    package_graph: dict[str, set[str]] = {package: set() for package in packages}
    for name, targets in graph.items():
        source = package_of(name, modules)
        package_graph[source].update(
            package_of(target, modules)
            for target in targets
            if package_of(target, modules) != source
        )
    back_edges = sorted(
        (name, target)
        for name, targets in graph.items()
        for target in targets
        if layer_of(target) > layer_of(name)
    )
    sizes = sorted(
        ((len(path.read_text().splitlines()), name) for name, path in modules.items()),
        reverse=True,
    )
    module_cycles = cycles(graph)
    package_cycles = cycles({k: sorted(v) for k, v in package_graph.items()})
    top = root.name
    folder_cycles = cycles({k: sorted(v - {top}) for k, v in package_graph.items() if k != top})
    return {
        "root": str(root),
        "modules": len(modules),
        "packages": len(packages),
        "top_level_modules": sum(1 for name in modules if name.count(".") == 1),
        "imports": sum(len(targets) for targets in graph.values()),
        "package_imports": sum(len(targets) for targets in package_graph.values()),
        "layers": [name for name, _ in LAYERS],
        "back_edges": [
            {
                "source": source,
                "target": target,
                "layers": [LAYERS[layer_of(source)][0], LAYERS[layer_of(target)][0]],
            }
            for source, target in back_edges
        ],
        "module_cycles": module_cycles,
        "package_cycles": package_cycles,
        "folder_cycles": folder_cycles,
        "largest": [{"module": name, "lines": lines} for lines, name in sizes[:LARGEST]],
    }


def report(numbers: Measurement) -> list[str]:
    """The measurement as lines a person reads."""
    back_edges = numbers["back_edges"]
    module_cycles = numbers["module_cycles"]
    package_cycles = numbers["package_cycles"]
    largest = numbers["largest"]
    lines = [
        f"root:               {numbers['root']}",
        f"modules:            {numbers['modules']} "
        f"({numbers['top_level_modules']} at the top level)",
        f"packages:           {numbers['packages']}",
        f"imports:            {numbers['imports']} between modules, "
        f"{numbers['package_imports']} between packages",
        f"module cycles:      {len(module_cycles)} "
        f"({sum(len(c) for c in module_cycles)} modules in them)",
        f"package cycles:     {len(package_cycles)} "
        f"({len(numbers['folder_cycles'])} among the folders, the top level left out)",
        f"back-edges:         {len(back_edges)} (layers, lowest first: "
        f"{' < '.join(numbers['layers'])})",
    ]
    lines += [f"  cycle of modules:  {' <-> '.join(cycle)}" for cycle in module_cycles]
    lines += [f"  cycle of packages: {' <-> '.join(cycle)}" for cycle in package_cycles]
    lines += [f"  cycle of folders:  {' <-> '.join(c)}" for c in numbers["folder_cycles"]]
    lines += [
        f"  back-edge: {edge['source']} -> {edge['target']} "
        f"({edge['layers'][0]} -> {edge['layers'][1]})"
        for edge in back_edges
    ]
    lines.append(f"largest modules ({len(largest)}):")
    lines += [f"  {row['lines']:>6}  {row['module']}" for row in largest]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "akk",
        help="the package directory to read (default: this checkout's akk/)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    numbers = measure(args.root.resolve())
    if args.json:
        print(json.dumps(numbers, indent=2))
    else:
        print("\n".join(report(numbers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
