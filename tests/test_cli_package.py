"""calc/cli is a package whose imports go one way (issue 10, item 6): output and args import no
other calc.cli module, the command modules import those two (and calc core), calc.cli.main imports
the command modules, and nothing but calc/cli/__init__.py imports calc.cli.main. Checked from the
source with `ast` (imports inside functions count too), so the old circle cannot come back."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import calc.cli

ROOT = Path(__file__).resolve().parents[1]
CLI_DIR = ROOT / "calc" / "cli"
MODULES = sorted(f"calc.cli.{m.name}" for m in pkgutil.iter_modules([str(CLI_DIR)]))
# calc.cli's own modules, and the extensions that register through calc.cli.main.EXTENSIONS
EXTENSION_FILES = ("calc/validate/cli.py", "calc/serving/cli.py")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in it; `from pkg import name` counts as
    pkg.name when that is a module, else as pkg (whose __init__ runs)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if importlib.util.find_spec(base) and _is_module(sub) else base)
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _cli_files() -> list[Path]:
    return sorted(CLI_DIR.glob("*.py"))


def test_the_package_has_the_modules_the_layout_names():
    assert {"calc.cli.main", "calc.cli.output", "calc.cli.args", "calc.cli.commands",
            "calc.cli.models", "calc.cli.plan", "calc.cli.fit"} <= set(MODULES)  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_every_module_imports(name):
    module = importlib.import_module(name)
    assert module.__name__ == name


def test_the_entry_point_is_the_function():
    assert callable(calc.cli.main) and calc.cli.main.__module__ == "calc.cli.main"


@pytest.mark.parametrize(
    "path",
    _cli_files() + [ROOT / f for f in EXTENSION_FILES],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_only_the_package_init_imports_main(path):
    """calc.cli.main (or the package calc.cli, whose __init__ imports it) is imported by
    calc/cli/__init__.py alone among calc.cli and its extensions."""
    if path == CLI_DIR / "__init__.py":
        return
    bad = {"calc.cli", "calc.cli.main"} & _imports(path)
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_nothing_else_in_calc_imports_main():
    """Besides the package's re-export, only `python -m calc` (calc/__main__.py) uses main."""
    importers = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "calc").rglob("*.py")
        if "calc.cli.main" in _imports(p)
    }
    assert importers == {"calc/cli/__init__.py", "calc/__main__.py"}


@pytest.mark.parametrize("name", ["output", "args"])
def test_the_shared_helpers_import_no_other_cli_module(name):
    own = {m for m in _imports(CLI_DIR / f"{name}.py") if m.startswith("calc.cli")}
    assert not own


def test_the_cli_import_graph_has_no_cycle():
    graph = {
        _module_name(p): {m for m in _imports(p) if m.startswith("calc.cli")} for p in _cli_files()
    }
    graph["calc.cli"].discard("calc.cli.main")  # the package's re-export is the one way in
    state: dict[str, int] = {}

    def visit(node: str, path: tuple[str, ...]) -> None:
        if state.get(node) == 2:
            return
        assert state.get(node) != 1, f"import cycle: {' -> '.join((*path, node))}"
        state[node] = 1
        for nxt in graph.get(node, ()):
            visit(nxt, (*path, node))
        state[node] = 2

    for node in graph:
        visit(node, ())
