"""One direction of dependency between the packages (docs/architecture.md, "Layers"): the
import-linter contracts in pyproject.toml, run on the tree and on a copy with a wrong import."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(Path(sys.executable).with_name("lint-imports")),
            "--config",
            "pyproject.toml",
            "--no-cache",
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_every_package_imports_only_the_layers_below_it() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def test_every_project_package_is_in_a_layer() -> None:
    packages = {p.parent.name for p in REPO.glob("*/apps.py")} | {"deskcomm"}
    layers, no_dev_tooling, _lgpd_reach, _inside_the_bus = CONFIG["contracts"]
    # "a | b" is one layer of independent siblings (the integration apps)
    in_layers = {name.strip() for layer in layers["layers"] for name in layer.split("|")}
    assert packages == in_layers == set(no_dev_tooling["source_modules"])
    assert set(CONFIG["root_packages"]) == packages | {"dev"}


def copy_tree(tmp_path: Path) -> None:
    """The project's packages and pyproject.toml, copied into `tmp_path`."""
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    for package in CONFIG["root_packages"]:
        shutil.copytree(
            REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )


def lint_with_import(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess[str]:
    """The contracts run on a copy of the tree whose `module` (a path) ends with `line`."""
    copy_tree(tmp_path)
    source = tmp_path / module
    source.write_text(f"{source.read_text()}\n{line}  # noqa: E402, F401\n")
    return lint_imports(tmp_path)


def test_the_contract_breaks_when_a_lower_layer_imports_a_higher_one(tmp_path: Path) -> None:
    result = lint_with_import(tmp_path, "core/db.py", "from crm.models import Contact")
    assert result.returncode == 1
    assert "core is not allowed to import crm" in result.stdout
    assert "core.db -> crm.models" in result.stdout


def test_the_integration_apps_may_not_import_each_other(tmp_path: Path) -> None:
    result = lint_with_import(tmp_path, "pipelines/models.py", "import ai.models")
    assert result.returncode == 1
    assert "pipelines.models -> ai.models" in result.stdout


def test_the_lgpd_app_imports_no_app_that_registers_personal_data(tmp_path: Path) -> None:
    """ai, nuvemshop and webhooks register their LGPD categories and hooks (core.lgpd_registry):
    lgpd reaches their data through the registry, never by importing them."""
    _layers, _no_dev_tooling, lgpd_reach, _inside_the_bus = CONFIG["contracts"]
    assert lgpd_reach["source_modules"] == ["lgpd"]
    assert {"ai", "nuvemshop", "webhooks"} <= set(lgpd_reach["forbidden_modules"])

    result = lint_with_import(tmp_path, "lgpd/services.py", "from nuvemshop import services")
    assert result.returncode == 1
    assert "lgpd is not allowed to import nuvemshop" in result.stdout
    assert "lgpd.services -> nuvemshop.services" in result.stdout


# -- inside the bus ------------------------------------------------------------------------------

# What is looked up by name stays at eventbus/'s top, outside the inner layers: the public API,
# Django's apps and models (and migrations, static), and the modules every app keeps under the
# same name (dramatiq's actors, the catalog's events, the scheduler's jobs, the LGPD registry's
# personal_data).
BUS_TOP = {
    *("__init__", "apps", "models", "migrations", "static"),
    *("actors", "events", "jobs", "personal_data"),
}


def test_every_module_of_the_bus_is_in_an_inner_layer() -> None:
    *_, inside = CONFIG["contracts"]
    assert inside["containers"] == ["eventbus"]
    layered = {name.strip() for layer in inside["layers"] for name in layer.split("|")}
    found = {
        path.stem
        for path in (REPO / "eventbus").iterdir()
        if (path.suffix == ".py" or (path / "__init__.py").exists()) and path.stem not in BUS_TOP
    }
    assert found == layered
    for layer in layered:  # each says what it owns
        assert ast.get_docstring(ast.parse((REPO / "eventbus" / layer / "__init__.py").read_text()))


def test_the_store_may_not_import_the_dispatch(tmp_path: Path) -> None:
    result = lint_with_import(
        tmp_path, "eventbus/store/emitter.py", "from eventbus.dispatch import claim"
    )
    assert result.returncode == 1
    assert "eventbus.store is not allowed to import eventbus.dispatch" in result.stdout
    assert "eventbus.store.emitter -> eventbus.dispatch.claim" in result.stdout


def test_the_operations_may_not_import_the_console(tmp_path: Path) -> None:
    result = lint_with_import(
        tmp_path, "eventbus/operations/status.py", "from eventbus.admin import selectors"
    )
    assert result.returncode == 1
    assert "eventbus.operations.status -> eventbus.admin.selectors" in result.stdout


# -- what the layers contract cannot see ------------------------------------------------------

# Strongly connected components of the module graph (grimp's, which import-linter uses: imports
# inside functions count too), printed as JSON by a fresh interpreter on `root`.
CYCLES_PROBE = """
import json, sys
import grimp

graph = grimp.build_graph(*sys.argv[1:], include_external_packages=False, cache_dir=None)
index, low, stack, on_stack, found = {}, {}, [], set(), []

def visit(module):
    index[module] = low[module] = len(index)
    stack.append(module)
    on_stack.add(module)
    for other in sorted(graph.find_modules_directly_imported_by(module)):
        if other not in index:
            visit(other)
            low[module] = min(low[module], low[other])
        elif other in on_stack:
            low[module] = min(low[module], index[other])
    if low[module] == index[module]:
        component = []
        while not component or component[-1] != module:
            component.append(stack.pop())
            on_stack.discard(component[-1])
        if len(component) > 1:
            found.append(sorted(component))

sys.setrecursionlimit(100_000)
for module in sorted(graph.modules):
    if module not in index:
        visit(module)
print(json.dumps(sorted(found)))
"""


def import_cycles(root: Path) -> list[list[str]]:
    packages = [p for p in CONFIG["root_packages"] if p != "dev"]
    result = subprocess.run(
        [sys.executable, "-c", CYCLES_PROBE, *packages],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    cycles: list[list[str]] = json.loads(result.stdout)
    return cycles


def test_no_module_imports_itself_back_through_others() -> None:
    """No import circle, not even one hidden by an import inside a function: within a package
    the layers contract sees none (core.db_timeouts -> core.pooler -> core.rls -> ... was one)."""
    assert import_cycles(REPO) == []


def test_an_import_circle_inside_a_function_is_seen(tmp_path: Path) -> None:
    copy_tree(tmp_path)
    flags = tmp_path / "core" / "flags.py"
    flags.write_text(
        f"{flags.read_text()}\n\ndef _late():\n    from core.models import Organization\n"
    )
    assert import_cycles(tmp_path) == [["core.flags", "core.models"]]


UPPER_APPS = frozenset(
    {"jobs", "eventbus", "crm", "webhooks", "lgpd", "pipelines", "ai", "nuvemshop", "whatsapp"}
)
UPPER_URL_NAME = re.compile(r"^(admin:(?P<model_app>[a-z]+)_\w+|(?P<namespace>[a-z]+)_\w*:[\w-]+)$")


def upper_app_names(source: str) -> list[str]:
    """The upper apps' URL names (`admin:eventbus_...`, `eventbus_ops:...`) and app labels in a
    sequence or a `get_app_config`/`get_model`/`is_installed` call that `source` spells out."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = UPPER_URL_NAME.match(node.value)
            if match and (match["model_app"] or match["namespace"]) in UPPER_APPS:
                found.append(node.value)
        elements: list[ast.expr] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            elements = list(node.elts)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name in {"get_app_config", "get_model", "is_installed"}:
                elements = node.args[:1]
        found += [
            e.value
            for e in elements
            if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in UPPER_APPS
        ]
    return found


def test_core_names_no_upper_app() -> None:
    """Ties the import graph cannot see: core reverses no upper app's URL and lists no upper
    app's label. The apps register what core shows of them (core.admin_links,
    core.restore_scope) from their AppConfig.ready."""
    named = {
        str(path.relative_to(REPO)): names
        for path in sorted((REPO / "core").rglob("*.py"))
        if "migrations" not in path.parts and (names := upper_app_names(path.read_text()))
    }
    assert named == {}


def test_the_upper_app_names_check_sees_urls_and_labels() -> None:
    source = (
        'reverse("admin:eventbus_delivery_change")\n_filtered("eventbus_ops:correlation")\n'
        'APPS = ("core", "crm")\napps.get_app_config("webhooks")\nFLAG = {"pipelines": 1}\n'
    )
    assert sorted(upper_app_names(source)) == [
        "admin:eventbus_delivery_change",
        "crm",
        "eventbus_ops:correlation",
        "webhooks",
    ]
