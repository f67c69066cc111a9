"""Every third-party module the shipped code imports is declared in setup.cfg (issue 30): the server's
in ``install_requires``, the Spark source's there or in the ``spark`` extra. A module that arrives only
as another package's dependency (cryptography through pyOpenSSL, zope.interface through Twisted) works
until that package stops needing it. An import inside a ``try`` that catches ImportError is optional
(tqdm's progress bars, ISA-L's CRC, LZ4 and ZSTD bodies) and is not counted."""
from __future__ import annotations

import ast
import configparser
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"rmqpy", "rmqpy_spark"}


def _optional(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside a ``try`` that catches ImportError: optional by construction."""
    nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                h.type is None or "ImportError" in ast.unparse(h.type) for h in node.handlers):
            for stmt in node.body:
                nodes |= {id(n) for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return nodes


def _imports(paths: list[Path]) -> dict[str, set[str]]:
    """Top-level module -> the files importing it (absolute imports anywhere in the file, optional
    ones aside)."""
    found: dict[str, set[str]] = {}
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        optional = _optional(tree)
        for node in ast.walk(tree):
            if id(node) in optional:
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def _declared(section: str, key: str) -> set[str]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = [line.split("#")[0].strip() for line in cfg.get(section, key).splitlines()]
    return {_normal(re.split(r"[<>=!~\[; ]", line)[0]) for line in lines if line}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _undeclared(paths: list[Path], declared: set[str]) -> dict[str, list[str]]:
    dists = packages_distributions()
    missing: dict[str, list[str]] = {}
    for module, files in _imports(paths).items():
        if module in sys.stdlib_module_names or module in FIRST_PARTY:
            continue
        owners = {_normal(d) for d in dists.get(module, [])}
        if not owners:
            missing[module] = sorted(files)  # installed by nothing: not declared either
        elif not owners & declared:
            missing[f"{module} ({', '.join(sorted(owners))})"] = sorted(files)
    return missing


def test_the_server_declares_what_it_imports() -> None:
    paths = sorted((ROOT / "rmqpy").rglob("*.py")) + sorted((ROOT / "twisted" / "plugins").glob("rmqpy_*.py"))
    assert _undeclared(paths, _declared("options", "install_requires")) == {}


def test_the_spark_source_declares_what_it_imports() -> None:
    declared = _declared("options", "install_requires") | _declared("options.extras_require", "spark")
    assert _undeclared(sorted((ROOT / "spark" / "rmqpy_spark").rglob("*.py")), declared) == {}
