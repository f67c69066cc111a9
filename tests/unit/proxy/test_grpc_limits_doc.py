"""docs/compatibility.md's table "gRPC limits and defaults" holds every number rmqpy's gRPC endpoint bounds
or defaults something with, at its value (issue 25: every gRPC default and limit with its source)."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "rmqpy" / "proxy" / "grpc"
#: wire constants, not limits: the broker's permission bits and EndTransaction's sys flags
PROTOCOL = {"PERM_READ", "PERM_WRITE", "TRANSACTION_COMMIT_TYPE", "TRANSACTION_ROLLBACK_TYPE"}
ROW = re.compile(r"^\| `([\w.]+)` \| (\d+) \| ")


def documented() -> dict[str, int]:
    text = (ROOT / "docs" / "compatibility.md").read_text()
    section = text.split("### gRPC limits and defaults, each with its source", 1)[1].split("\n### ", 1)[0]
    return {m.group(1): int(m.group(2)) for line in section.splitlines() if (m := ROW.match(line))}


def defined() -> dict[str, int]:
    """``module.NAME`` -> value of every upper-case int constant a module of the package assigns itself."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        names = [t.id for node in ast.parse(path.read_text()).body if isinstance(node, (ast.Assign, ast.AnnAssign))
                 for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                 if isinstance(t, ast.Name) and t.id.isupper() and t.id not in PROTOCOL]
        if names:
            mod = importlib.import_module(f"rmqpy.proxy.grpc.{module}")
            out.update({f"{module}.{n}": getattr(mod, n) for n in names if type(getattr(mod, n)) is int})
    return out


def problems(rows: dict[str, int], code: dict[str, int]) -> list[str]:
    return ([f"{k}: no row in docs/compatibility.md" for k in sorted(set(code) - set(rows))]
            + [f"{k}: a row naming no constant of rmqpy/proxy/grpc" for k in sorted(set(rows) - set(code))]
            + [f"{k}: {v} in the code, {rows[k]} in the table" for k, v in sorted(code.items()) if k in rows
               and rows[k] != v])


def test_every_limit_has_a_row_with_its_value() -> None:
    rows = documented()
    assert len(rows) >= 30
    assert problems(rows, defined()) == []


def test_a_new_constant_a_stale_value_or_a_gone_one_is_caught() -> None:
    code = defined()
    rows = dict(documented())
    rows["polling.MAX_POLLING_MS"] += 1
    rows["gone.MAX_THING"] = 1
    del rows["activity.send.MAX_DELAY_MS"]
    assert problems(rows, code) == ["activity.send.MAX_DELAY_MS: no row in docs/compatibility.md",
                                    "gone.MAX_THING: a row naming no constant of rmqpy/proxy/grpc",
                                    "polling.MAX_POLLING_MS: 20000 in the code, 20001 in the table"]
