"""The modules of ``dispatch`` import each other without a cycle, so the layers read top-down.

The graph has an edge for every ``import``/``from ... import`` of a ``dispatch`` module anywhere in a module
(function-level imports included), except those under ``if TYPE_CHECKING:`` (annotations only, never run) and
a module's own parent packages (imported by Python anyway). A cycle is named with its modules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


KUBETEST_SRC = SRC.parent / "kubetest" / "src"


def _modules(src: Path = SRC, package: str = "dispatch") -> dict[str, Path]:
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, package: str, annotations: bool = False) -> list[str]:
    """The modules ``tree`` imports; with ``annotations``, those under ``if TYPE_CHECKING:`` too."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not annotations:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.append(base)
            found.extend(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(src: Path = SRC, root: str = "dispatch", annotations: bool = False) -> dict[str, set[str]]:
    modules = _modules(src, root)

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        for k in range(len(parts), 0, -1):
            if ".".join(parts[:k]) in modules:
                return ".".join(parts[:k])
        return None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for target in _imports(ast.parse(path.read_text(encoding="utf-8")), package, annotations):
            if not target.startswith(root):
                continue
            hit = resolve(target)
            if hit is not None and hit != name and not name.startswith(hit + "."):
                graph[name].add(hit)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_annotations_included() -> None:
    """The product reads top-down: no cycle, even through an import only an annotation needs (a lower module names
    what it needs of an upper one as a Protocol, as :class:`dispatch.follow.Followed` does)."""
    graph = import_graph(annotations=True)
    assert len(graph) > 50 and graph["dispatch.cluster"], "the graph was read"
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_model_kubernetes_reads_top_down_annotations_included() -> None:
    """``dispatch_kubetest`` (the distribution ``dispatch-kubetest``): no cycle even through an annotation; a lower
    module names what it needs of an upper one as a Protocol of its own."""
    graph = import_graph(KUBETEST_SRC, "dispatch_kubetest", annotations=True)
    assert len(graph) > 30 and graph["dispatch_kubetest.server"], "the graph was read"
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_check_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    source = "import dispatch.x\nif TYPE_CHECKING:\n    from dispatch import y\ndef f():\n    from . import z\n"
    tree = ast.parse(source)
    assert _imports(tree, "dispatch.pkg") == ["dispatch.x", "dispatch.pkg", "dispatch.pkg.z"]
    assert "dispatch.y" in _imports(tree, "dispatch.pkg", annotations=True)


@pytest.mark.parametrize("module", ["dispatch.spi", "dispatch.declarations", "dispatch.cli.admin", "dispatch.cli.main"])
def test_each_layer_imports_alone(module: str) -> None:
    """Imported first, in a fresh interpreter, each module of a former cycle loads (and the CLI still works)."""
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, timeout=60)


USER_API = {
    "Answer",
    "AttemptId",
    "Capabilities",
    "Capability",
    "CapabilityAnswer",
    "Cause",
    "CessationWarning",
    "Clock",
    "Cluster",
    "Config",
    "ConfigError",
    "Conflict",
    "DispatchError",
    "Evidence",
    "Executor",
    "FakeClock",
    "Image",
    "JobSpec",
    "NotFound",
    "Observer",
    "Operator",
    "Outcome",
    "OutcomeUnknown",
    "Output",
    "Provenance",
    "ReadOnly",
    "Rejected",
    "Resources",
    "RestartId",
    "RuleSet",
    "SharedCheckpoint",
    "SpecError",
    "State",
    "SystemClock",
    "Unavailable",
    "Unsupported",
    "open",
    "records",
}
"""What a user calls: submits, observes, supervises, reads records and outcomes with, handles as errors."""

MOVED_TO_SPI = {
    "UNBOUNDED",
    "Backend",
    "BatchStarter",
    "CessationSignal",
    "DeclarationError",
    "Declarations",
    "ExecutionOutput",
    "Extension",
    "ExtensionPolicy",
    "Holder",
    "IdentityWeakener",
    "MultiFinder",
    "NativePolicyCompiler",
    "OpenOptions",
    "OutputKeeper",
    "OutputReader",
    "OutputSlices",
    "PolledLoss",
    "Readmitter",
    "Requeuer",
    "Watcher",
    "new_backend",
    "register",
    "register_extension",
}
"""What an adapter author implements, declares or registers with, once exported by ``dispatch`` too."""


def test_the_package_exports_the_user_api_and_nothing_else() -> None:
    import dispatch

    assert set(dispatch.__all__) == USER_API
    assert len(dispatch.__all__) == len(USER_API), "no name twice"
    assert not USER_API & MOVED_TO_SPI


def test_every_spi_name_resolves_and_the_moved_names_are_among_them() -> None:
    import dispatch.spi

    for name in dispatch.spi.__all__:
        assert getattr(dispatch.spi, name) is not None, name
    assert set(dispatch.spi.__all__) >= MOVED_TO_SPI
    assert not set(dispatch.spi.__all__) & USER_API, "a user name stays in dispatch alone"
    assert set(dispatch.spi.__all__) <= set(dir(dispatch.spi))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = dispatch.spi.no_such_name


@pytest.mark.parametrize("name", sorted(MOVED_TO_SPI))
def test_an_old_name_warns_once_with_its_new_home_and_gives_the_same_object(name: str) -> None:
    """The only test that reads a moved name from ``dispatch``: pytest.warns lifts the project's error filter."""
    import dispatch
    import dispatch.spi

    with pytest.warns(DeprecationWarning) as caught:
        old = getattr(dispatch, name)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert f"dispatch.spi.{name}" in message and "release 0.1.0" in message, message
    assert caught[0].filename == __file__, "the warning points at the caller"
    assert old is getattr(dispatch.spi, name)


def test_a_from_import_of_an_old_name_warns_once() -> None:
    """``from dispatch import X`` reads X twice (the import system probes with hasattr first): one warning."""
    namespace: dict[str, object] = {}
    with pytest.warns(DeprecationWarning, match=r"use dispatch\.spi\.Holder") as caught:
        exec("from dispatch import Holder", namespace)
    assert len(caught) == 1
    import dispatch.spi

    assert namespace["Holder"] is dispatch.spi.Holder


def test_the_project_s_filter_turns_the_warning_into_an_error() -> None:
    """pyproject's filterwarnings: outside pytest.warns, reading a moved name fails the test that does it."""
    import dispatch

    with pytest.raises(DeprecationWarning, match=r"dispatch\.spi\.Holder"):
        _ = dispatch.Holder


def test_a_star_import_gives_the_user_api_and_no_spi_name() -> None:
    namespace: dict[str, object] = {}
    exec("from dispatch import *", namespace)  # the one way to see what a star import binds
    names = {n for n in namespace if not n.startswith("__")}
    assert names == USER_API
    import dispatch.spi

    assert not names & set(dispatch.spi.__all__)


def test_the_spi_and_the_package_import_alone_and_lazily() -> None:
    """``import dispatch.spi`` loads neither the cluster nor the registry (they import it); ``import dispatch``
    loads no submodule at all."""
    code = (
        "import sys, dispatch\n"
        "assert [m for m in sys.modules if m.startswith('dispatch.')] == [], sys.modules\n"
        "import dispatch.spi\n"
        "assert 'dispatch.cluster' not in sys.modules and 'dispatch.registry' not in sys.modules\n"
        "dispatch.spi.register\n"
        "assert 'dispatch.registry' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True, timeout=60)
