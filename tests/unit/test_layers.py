"""The layer table of docs/architecture.md, checked against the imports of rmqpy/: each module imports
only modules of its own layer or of the layers below it. One arrow runs up: the broker's tap builds
the gRPC endpoint (rmqpy/proxy/grpc/), which sits above the broker."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the table's rows, bottom up; a package's modules are in its row unless named on their own
LAYERS = [
    ["rmqpy.protocol", "rmqpy.speedups", "rmqpy._speedups"],  # the compiled loops serve protocol and store
    ["rmqpy.common"],  # but metrics and startup (server plumbing)
    ["rmqpy.remoting"],
    ["rmqpy.store"],
    ["rmqpy.acl"],
    ["rmqpy.auth"],
    ["rmqpy.common.metrics", "rmqpy.common.startup"],
    ["rmqpy.namesrv", "rmqpy.broker", "rmqpy.controller"],
    ["rmqpy.proxy"],
    ["rmqpy.tools", "rmqpy.client", "rmqpy.cli", "rmqpy.conf", "rmqpy"],
]
ALLOWED_UP = {("rmqpy.broker.tap", "rmqpy.proxy")}


def layer(module: str) -> int:
    """The row of the longest prefix of ``module`` that a row names."""
    best, found = -1, len(LAYERS) - 1
    for i, row in enumerate(LAYERS):
        for prefix in row:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), i
    return found


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n for n in names if n.startswith("rmqpy.")}


def test_every_import_goes_to_the_same_layer_or_below() -> None:
    upward = []
    for path in sorted((ROOT / "rmqpy").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for imported in imports_of(path):
            if layer(imported) > layer(module) and not any(
                    module == low and (imported == high or imported.startswith(high + "."))
                    for low, high in ALLOWED_UP):
                upward.append(f"{module} -> {imported}")
    assert upward == []


def test_the_broker_reaches_the_grpc_endpoint_only_from_its_tap() -> None:
    importers = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts)
                       for p in (ROOT / "rmqpy" / "broker").rglob("*.py")
                       if any(n == "rmqpy.proxy" or n.startswith("rmqpy.proxy.") for n in imports_of(p)))
    assert importers == ["rmqpy.broker.tap"]


def test_the_check_sees_an_upward_import() -> None:
    assert layer("rmqpy.common.faq") < layer("rmqpy.remoting.tls") < layer("rmqpy.common.startup")
    assert layer("rmqpy.broker.api") < layer("rmqpy.proxy.grpc.activities") < layer("rmqpy.tools.codes_table")
