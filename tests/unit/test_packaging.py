"""Every package of the source tree is in the distribution (an editable install hides a missing
one: `pip install .` then fails with ModuleNotFoundError only where it is used)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent.parent


def test_every_package_folder_is_listed_in_pyproject():
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setup["packages"])
    folders = {name: ROOT / path for name, path in setup["package-dir"].items()}
    found = set()
    for name, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            package = ".".join((name, *relative))
            if not any(package.startswith(other + ".") for other in folders if other != name and len(other) > len(name)):
                found.add(package)
    assert found - listed == set(), "packages missing from pyproject.toml's [tool.setuptools] packages"
