"""The folders say which code is shared and which belongs to one engine, and the layers of the shared code point
one way (docs/design.md, Layout and Shared code).

python/dyngrad/__init__.py and _cpp_*.py are the C++ engine's, python/dyngrad/reference/ is the reference engine,
everything else under python/dyngrad/ is shared: it serves both engines through `from .. import _C` and must not
reach for one engine by name, and the reference folder must not shadow a shared module.

Note [One-way layers]: the shared modules import each other when they load, never from inside a function (a
function-level import of our own modules is how a circle is hidden), and those load-time imports form no circle.
From the bottom: the engine's core (_C); _api/host/ (numpy only, no tensors); _api/bridge.py (the core alone);
autograd's modules (the core; its profiler, which wraps the API, loads on first use); the machinery of _api/
(args, device, dtypes, node names, out=, in-place variants, generators, settings, printing, the table); the op
families of _api/ops/; the engine root, where install() publishes the table; and above it nn, optim, utils,
distributions, viz, ..., loaded on first use, which may import the root's public names.
"""
import ast
import importlib
import os

import pytest

import dyngrad

PACKAGE = os.path.dirname(os.path.abspath(dyngrad.__file__))
REFERENCE = os.path.join(PACKAGE, "reference")


def shared_files():
    for folder, dirs, files in os.walk(PACKAGE):
        # bench/ drives every engine (and torch) side by side: it is a tool over the engines, not code of one
        dirs[:] = [d for d in dirs if d not in ("reference", "__pycache__", "bench")]
        for f in files:
            path = os.path.join(folder, f)
            rel = os.path.relpath(path, PACKAGE)
            if f.endswith(".py") and rel != "__init__.py" and not rel.startswith("_cpp_"):
                yield rel, path


def top_level_shared_names():
    names = set()
    for entry in os.listdir(PACKAGE):
        if entry in ("reference", "__pycache__", "__init__.py") or entry.startswith("_cpp_"):
            continue
        if entry.endswith(".py"):
            names.add(entry[:-3])
        elif os.path.isfile(os.path.join(PACKAGE, entry, "__init__.py")):
            names.add(entry)
    return names


def _in_function(tree):
    """The import statements of `tree` that run inside a function (or lambda) body."""
    out = []

    def walk(node, inside):
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append(child)
            walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    walk(tree, False)
    return out


def _at_load(tree):
    """The import statements of `tree` that run when the module loads (not inside functions)."""
    stack, out = list(tree.body), []
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def _ours(node):
    """Whether an import statement names a dyngrad module (relative, or `import dyngrad...`); imports of optional
    third-party packages (mpi4py, tensorboardX, scipy, graphviz) stay lazy and are not what the rule is about."""
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "dyngrad"
    return any(a.name.split(".")[0] == "dyngrad" for a in node.names)


# Files that may still import our own modules inside functions, each with the reason. None is left: the data
# loader's files, the last four, import the root's names at the top (utils/ loads after the root is installed), and
# a file added here needs a reason a top-level import cannot serve.
FUNCTION_LEVEL_IMPORTS_ALLOWED = {}


def test_no_function_level_imports_of_our_modules():
    """Note [One-way layers]: a shared module imports dyngrad's modules at load time only."""
    bad = []
    for rel, path in sorted(shared_files()):
        if rel in FUNCTION_LEVEL_IMPORTS_ALLOWED:
            continue
        for node in _in_function(ast.parse(open(path, encoding="utf-8").read())):
            if _ours(node):
                bad.append(f"{rel}:{node.lineno}")
    assert not bad, f"function-level imports of dyngrad's own modules (import at the top instead): {bad}"


def test_function_level_allow_list_is_current():
    """Every allow-list entry names a shared file that still needs it."""
    files = dict(shared_files())
    stale = [rel for rel in FUNCTION_LEVEL_IMPORTS_ALLOWED if rel not in files or not any(
        _ours(n) for n in _in_function(ast.parse(open(files[rel], encoding="utf-8").read())))]
    assert not stale, f"allow-list entries no longer needed: {stale}"


def _module_name(rel):
    name = rel[:-3].replace(os.sep, ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def load_time_graph():
    """module -> the modules it imports when it loads (module names relative to the package; "" is the engine
    root). `from <root> import X` is an edge to the root when X is one of its public names (installed from the
    table), to the submodule X otherwise (_C, the core, is left out); the root itself loads the modules of the
    table's rows (install()) and its own imports."""
    files = {_module_name(rel): path for rel, path in shared_files()}
    files[""] = os.path.join(PACKAGE, "__init__.py")
    edges = {name: set() for name in files}
    for me, path in files.items():
        package = path.endswith("__init__.py")
        for node in _at_load(ast.parse(open(path, encoding="utf-8").read())):
            if not _ours(node) or isinstance(node, ast.Import):
                continue
            base = me.split(".") if me else []
            if not package:
                base = base[:-1]
            base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                if sub in files:
                    edges[me].add(sub)
                elif not (target == "" and alias.name == "_C") and not sub.startswith("_cpp_"):
                    edges[me].add(target)
    from dyngrad._api.table import rows
    for row in rows():
        if not row.impl.startswith("core"):
            module = row.impl.rpartition(".")[0]
            module = module if module.split(".")[0] == "autograd" else "_api." + module
            while module not in files:
                module = module.rpartition(".")[0]
            edges[""].add(module)
    return edges


def test_shared_modules_import_without_circles():
    """Note [One-way layers]: the load-time imports form no circle (strongly connected components of one)."""
    edges = load_time_graph()
    index, low, stack, on_stack, circles = {}, {}, [], set(), []
    for root in edges:                       # Tarjan's algorithm, iteratively
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
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
                if len(component) > 1 or node in edges[node]:
                    circles.append(sorted(m or "<root>" for m in component))
    assert not circles, f"import circles among the shared modules: {circles}"


UPPER = ("nn", "optim", "utils", "viz", "distributions", "distributed", "serialization", "bench", "functional",
         "linalg", "special", "cuda", "backends", "profiler", "random", "testing", "compiler")


def test_layers_point_one_way():
    """Note [One-way layers]: host numerics import nothing of ours, the bridge only the core, the machinery of _api
    no op family, and neither _api nor autograd's load-time modules anything above the engine root."""
    edges = load_time_graph()
    wrong = []
    for module, targets in edges.items():
        for target in targets:
            if module.startswith("_api.host") and target.split(".")[0] != "_api" or (
                    module.startswith("_api.host") and not target.startswith("_api.host")):
                wrong.append((module, target))
            elif module == "_api.bridge":
                wrong.append((module, target))
            elif module.startswith("_api") and not module.startswith("_api.ops") and target.startswith("_api.ops"):
                wrong.append((module, target))
            elif module.split(".")[0] in ("_api", "autograd") and (target == "" or target.split(".")[0] in UPPER):
                wrong.append((module, target))
    assert not wrong, f"imports against the layers (module, what it imports): {sorted(wrong)}"


def engine_imports(source):
    """The imports in `source` that name one engine: `import dyngrad...`, `from dyngrad...`, `from ..reference`,
    `from .._cpp_...` (docstrings and comments do not count)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.split(".")[0] == "dyngrad"]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [module] + [a.name for a in node.names] if node.level else [module]
            if (node.level == 0 and module.split(".")[0] == "dyngrad") or (
                    node.level and any(n.split(".")[0] in ("reference",) or n.startswith("_cpp_") for n in names)):
                bad.append("." * node.level + module)
    return bad


@pytest.mark.parametrize("rel,path", sorted(shared_files()))
def test_shared_code_names_no_engine(rel, path):
    bad = engine_imports(open(path, encoding="utf-8").read())
    assert not bad, f"{rel} is shared code but imports one engine: {bad}"


def test_reference_shadows_no_shared_module():
    own = {f[:-3] if f.endswith(".py") else f for f in os.listdir(REFERENCE) if not f.startswith("__")}
    shadowed = own & top_level_shared_names()
    assert not shadowed, f"python/dyngrad/reference/ has modules named like shared ones: {sorted(shadowed)}"


@pytest.mark.parametrize("name", sorted(top_level_shared_names() - {"bench"}))
def test_shared_modules_load_under_both_engines(name):
    for root in ("dyngrad", "dyngrad.reference"):
        module = importlib.import_module(f"{root}.{name}")
        assert module.__name__ == f"{root}.{name}"
