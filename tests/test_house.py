"""The house's one-way imports under the one import root `blockheat`: jobs > libs > sim, schemas and data leaves,
no circles. Two independent checks: the import contract (import-linter, pyproject.toml) and an AST scan of every
import statement, function-level ones included; each must pass on the tree and fail on a deliberately added
back-import."""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT = "blockheat"
PACKAGES = ("jobs", "libs", "sim", "schemas", "data")
FLOOR = {"jobs": 3, "libs": 2, "sim": 1, "schemas": 1, "data": 1}
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def module_names(root: Path) -> dict[str, Path]:
    """Installed dotted module name (blockheat.<folder>...) -> file, for every module of the project's packages
    under `root`."""
    out = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            name = ".".join((ROOT, *path.relative_to(root).with_suffix("").parts))
            out[name.removesuffix(".__init__")] = path
    return out


def import_graph(root: Path) -> nx.DiGraph:
    """Module -> module edges of every `import` and `from ... import` naming a project module (any depth)."""
    modules = module_names(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    for module, path in modules.items():
        graph.add_node(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                target = resolve(name) if name.split(".")[0] == ROOT else None
                if target and target != module:
                    graph.add_edge(module, target, line=node.lineno)
    return graph


def house_faults(root: Path) -> list[str]:
    """Every upward or sideways import between floors, every import of the CLI by a job, and every circle."""
    graph = import_graph(root)
    faults = []
    for a, b, data in graph.edges(data=True):
        top_a, top_b = a.split(".")[1], b.split(".")[1]
        if top_a != top_b and (FLOOR[top_a] <= FLOOR[top_b]):
            faults.append(f"{a} -> {b} (line {data['line']}): {top_a} may not import {top_b}")
        if a.startswith("blockheat.jobs.") and not a.startswith("blockheat.jobs.cli") and b.startswith(
                "blockheat.jobs.cli"):
            faults.append(f"{a} -> {b} (line {data['line']}): a job may not import the command")
    faults += [f"circle: {' -> '.join([*cycle, cycle[0]])}" for cycle in nx.simple_cycles(graph)]
    return faults


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on the house under `root`: the repository (through the editable install), or a copy whose
    folders are laid out as installed (<root>/_site/blockheat/<folder>) and found first on the path."""
    site = root / "_site"
    env = {**os.environ, "PYTHONPATH": str(site)} if site.is_dir() else dict(os.environ)
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", str(root / "pyproject.toml")], cwd=root,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def copied_house(tmp_path: Path) -> Path:
    """A copy of the house: its folders at the top (the AST scan) and, as links, in the installed layout."""
    (tmp_path / "_site" / ROOT).mkdir(parents=True)
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
        (tmp_path / "_site" / ROOT / package).symlink_to(tmp_path / package, target_is_directory=True)
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_import_graph_runs_one_way() -> None:
    assert house_faults(REPO) == []


def test_the_import_contract_holds() -> None:
    run = lint_imports(REPO)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


@pytest.mark.parametrize(("importer", "line", "fault"), [
    ("sim/records.py", "from blockheat.libs.io import tables", "blockheat.sim.records -> blockheat.libs.io.tables"),
    ("schemas/traces.py", "import blockheat.sim.records", "blockheat.schemas.traces -> blockheat.sim.records"),
    ("libs/readers/scan.py", "from blockheat.jobs.cli import main",
     "blockheat.libs.readers.scan -> blockheat.jobs.cli.main"),
    ("jobs/extent_heat.py", "from blockheat.jobs.cli import main",
     "blockheat.jobs.extent_heat -> blockheat.jobs.cli.main"),
    ("data/__init__.py", "from blockheat.sim import records", "blockheat.data -> blockheat.sim.records"),
])
def test_a_back_import_breaks_both_checks(copied_house: Path, importer: str, line: str, fault: str) -> None:
    path = copied_house / importer
    path.write_text(path.read_text() + f"\n\ndef _back() -> None:\n    {line}\n")   # function-level: hidden at run time
    assert any(f.startswith(fault) for f in house_faults(copied_house)), house_faults(copied_house)
    run = lint_imports(copied_house)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"{fault} (l." in run.stdout


def test_a_circle_inside_libs_breaks_both_checks(copied_house: Path) -> None:
    path = copied_house / "libs/readers/scan.py"           # readers.scan -> ingest.pipeline -> readers.scan
    path.write_text(path.read_text() + "\n\ndef _back() -> None:\n    from blockheat.libs.ingest import pipeline\n")
    assert any(f.startswith("circle:") and "blockheat.libs.readers.scan" in f for f in house_faults(copied_house))
    run = lint_imports(copied_house)
    assert run.returncode == 1
    assert "No cycles are allowed in blockheat.libs." in run.stdout


@pytest.mark.parametrize("importer", ["libs/transforms/heat.py", "libs/alis/units.py", "libs/plans/cost.py"])
def test_table_io_in_a_pure_package_breaks_the_contract(copied_house: Path, importer: str) -> None:
    path = copied_house / importer
    path.write_text(path.read_text() + "\n\ndef _io() -> None:\n    from blockheat.libs.io.tables import read_table\n")
    run = lint_imports(copied_house)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "read and write no tables" in run.stdout
    assert "BROKEN" in run.stdout


PY4J_INTERNALS = re.compile(r"\._(jvm|jsparkSession|jsc|jdf|jconf|gateway|jss|jreader|jwrite|jseq|jmap)\b")


def test_no_py4j_access_to_spark_or_delta_internals() -> None:
    """Public APIs only (they also work under Spark Connect, which has no py4j gateway): no spark._jvm,
    _jsparkSession, _jsc, _jdf or other py4j handle anywhere in the product's code."""
    found = []
    for top in ("libs", "jobs", "sim", "dags", "data"):
        for path in sorted((REPO / top).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if PY4J_INTERNALS.search(line.split("#")[0]):
                    found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert found == []
    assert PY4J_INTERNALS.search("x = spark._jvm.org.apache")           # the pattern catches what it is for
    assert PY4J_INTERNALS.search("spark._jsparkSession.sessionState()")


def test_other_layers_use_the_simulator_through_its_public_face() -> None:
    """Outside sim, every import of the simulator is `from blockheat.sim import NAME` with NAME in sim.__all__:
    no module of sim (private or not) is imported by path, so its modules can move without touching the rest."""
    from blockheat import sim

    found = []
    for package in ("jobs", "libs", "schemas", "data", "dags"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("blockheat.sim"):
                    bad = [a.name for a in node.names if node.module != "blockheat.sim" or a.name not in sim.__all__]
                elif isinstance(node, ast.Import):
                    bad = [a.name for a in node.names if a.name.startswith("blockheat.sim")]
                else:
                    continue
                found += [f"{path.relative_to(REPO)}:{node.lineno}: {getattr(node, 'module', None) or ''} {b}"
                          for b in bad]
    assert found == []


def test_the_simulators_public_names_resolve_inside_sim() -> None:
    import importlib

    from blockheat import sim

    assert sim.__all__ == sorted(sim._EXPORTS)
    for name, (module, attr) in sim._EXPORTS.items():
        assert getattr(sim, name) is getattr(importlib.import_module(f"blockheat.sim.{module}"), attr), name
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = sim.no_such_name
