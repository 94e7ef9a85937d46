"""The layer contract of auditkit (issue 40, docs/guide/layout.md "Layers").

Every source module is parsed with ``ast`` and mapped to its layer; an import of
an auditkit module from a higher layer fails, module-level or inside a function
alike (``if TYPE_CHECKING:`` imports count too), and so does any import cycle
among auditkit modules. No new dependency: plain pytest.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Source folders and the package each installs as (pyproject's package-dir).
SOURCES = {
    "auditkit": ROOT / "auditkit",
    "auditkit.mechanisms": ROOT / "mechanisms",
    "auditkit.attacks": ROOT / "attacks",
    "auditkit.reports": ROOT / "reports",
}

# Lowest first. The longest matching prefix decides a module's layer. Two cuts differ from the sketch
# (mechanisms -> attacks -> fl -> stages -> results -> reports -> cli), as the code has them:
# * results sits below the stages: the stages build their sections with its builders (results imports no stage);
# * auditkit.flower.strategy (AuditStrategy, what a user's own Flower ServerApp wraps its strategy in) is app: it
#   checks the user's config tables with auditkit.config; the rest of auditkit.flower is the FL engine.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("auditkit.version", "auditkit.validation", "auditkit.config_bounds", "auditkit.bibliography",
              "auditkit.factories", "auditkit.input_fingerprint",
              "auditkit.folder", "auditkit.output_folder",
              "auditkit.strict_json")),
    ("mechanisms", ("auditkit.mechanisms",)),
    ("attacks", ("auditkit.attacks",)),
    ("fl", ("auditkit.fl", "auditkit.data", "auditkit.models", "auditkit.accounting", "auditkit.flower")),
    ("results", ("auditkit.results",)),
    ("stages", ("auditkit.config", "auditkit.stages", "auditkit.stage_store")),
    ("reports", ("auditkit.reports",)),
    ("app", ("auditkit.audit", "auditkit.figure_files", "auditkit.reproduction", "auditkit.presets", "auditkit.cli",
             "auditkit.flower.strategy", "auditkit")),
]



def _module_name(package: str, folder: Path, path: Path) -> str:
    parts = list(path.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def source_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package, folder in SOURCES.items():
        for path in sorted(folder.rglob("*.py")):
            if ".venv" in path.parts or "templates" in path.parts:
                continue
            if package == "auditkit" and path.relative_to(folder).parts[0] in ("mechanisms", "attacks", "reports"):
                continue
            modules[_module_name(package, folder, path)] = path
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The auditkit module an imported dotted name lives in (longest known prefix)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported auditkit module, line, deferred) for every import in the module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    target = _resolve(alias.name, modules)
                    if target and target != module:
                        found.append((target, child.lineno, deferred))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".")
                    drop = child.level - 1 if is_package else child.level
                    base = base[: len(base) - drop] if drop else base
                    prefix = ".".join(base + ([child.module] if child.module else []))
                else:
                    prefix = child.module or ""
                for alias in child.names:
                    target = _resolve(f"{prefix}.{alias.name}", modules) or _resolve(prefix, modules)
                    if target and target != module:
                        found.append((target, child.lineno, deferred))
            visit(child, inner)

    visit(tree, False)
    return found


def layer_of(module: str) -> int:
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    assert best is not None, f"{module} has no layer: add it to LAYERS"
    return best


def import_graph() -> dict[str, dict[str, list[tuple[int, bool]]]]:
    modules = source_modules()
    graph: dict[str, dict[str, list[tuple[int, bool]]]] = {m: {} for m in modules}
    for module, path in modules.items():
        for target, line, deferred in imports_of(module, path, modules):
            graph[module].setdefault(target, []).append((line, deferred))
    return graph


def _where(graph, source: str, target: str) -> str:
    return ", ".join(dict.fromkeys(f"line {line}{' (deferred)' if deferred else ''}"
                                   for line, deferred in graph[source][target]))


def test_every_module_has_a_layer():
    for module in source_modules():
        layer_of(module)


def test_no_upward_imports():
    graph = import_graph()
    upward = []
    for source, targets in graph.items():
        for target in targets:
            if layer_of(target) > layer_of(source):
                upward.append(
                    f"{source} [{LAYERS[layer_of(source)][0]}] imports {target} "
                    f"[{LAYERS[layer_of(target)][0]}] at {_where(graph, source, target)}"
                )
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def _cycles(graph: dict[str, dict]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def strongconnect(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                strongconnect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    return components


def test_no_import_cycles():
    graph = import_graph()
    cycles = _cycles(graph)
    lines = []
    for component in cycles:
        members = set(component)
        lines.append("cycle: " + ", ".join(component))
        for source in component:
            for target in graph[source]:
                if target in members:
                    lines.append(f"  {source} -> {target} at {_where(graph, source, target)}")
    assert not cycles, "import cycles:\n" + "\n".join(lines)



def test_deferred_imports_say_why():
    """An auditkit import inside a function is kept only where a comment on its line or the line above says why (an
    optional dependency, a command's start-up time): everywhere else the import sits at the top of the module,
    where a reader sees what the module depends on."""
    unexplained = []
    for module, path in source_modules().items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for target, line, deferred in imports_of(module, path, source_modules()):
            if deferred and "#" not in lines[line - 1] and (line < 2 or not lines[line - 2].lstrip().startswith("#")):
                unexplained.append(f"{module} imports {target} inside a function at line {line}")
    assert not unexplained, "deferred imports without a reason:\n" + "\n".join(sorted(set(unexplained)))
