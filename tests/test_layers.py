"""One direction of dependency between the packages (docs/architecture.md, "Layers"): the
import-linter contracts in pyproject.toml, run on the tree and on a copy with a wrong import."""

from __future__ import annotations

import os
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
    assert "3 kept, 0 broken" in result.stdout


def test_every_project_package_is_in_a_layer() -> None:
    packages = {p.parent.name for p in REPO.glob("*/apps.py")} | {"deskcomm"}
    layers, no_dev_tooling, _lgpd_reach = CONFIG["contracts"]
    # "a | b" is one layer of independent siblings (the integration apps)
    in_layers = {name.strip() for layer in layers["layers"] for name in layer.split("|")}
    assert packages == in_layers == set(no_dev_tooling["source_modules"])
    assert set(CONFIG["root_packages"]) == packages | {"dev"}


def lint_with_import(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess[str]:
    """The contracts run on a copy of the tree whose `module` (a path) ends with `line`."""
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    for package in CONFIG["root_packages"]:
        shutil.copytree(
            REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
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
    _layers, _no_dev_tooling, lgpd_reach = CONFIG["contracts"]
    assert lgpd_reach["source_modules"] == ["lgpd"]
    assert {"ai", "nuvemshop", "webhooks"} <= set(lgpd_reach["forbidden_modules"])

    result = lint_with_import(tmp_path, "lgpd/services.py", "from nuvemshop import services")
    assert result.returncode == 1
    assert "lgpd is not allowed to import nuvemshop" in result.stdout
    assert "lgpd.services -> nuvemshop.services" in result.stdout
