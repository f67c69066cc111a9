"""What the two differential harnesses share (tests/interop/grpc_diff.py for gRPC, remoting_diff.py for
the remoting protocol): a case's two answers, the rules that explain their differences (each written
down in docs/compatibility.md), and the long runs' command line and report (bench/*_diff_long.py)."""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, Protocol, Sequence, TypeVar


class _Answer(Protocol):
    def differences(self, other: Any) -> list[str]: ...


C = TypeVar("C")
A = TypeVar("A", bound=_Answer)


@dataclass
class Result(Generic[C, A]):
    """One case and what rmqpy (``ours``) and the reference (``theirs``) answered."""

    case: C
    ours: A
    theirs: A

    @property
    def differences(self) -> list[str]:
        return self.ours.differences(self.theirs)


#: a case name pattern; a pattern each difference must match, or a test of the whole result that
#: explains all of its differences; the reason
Rule = tuple[str, "str | Callable[[Any], bool]", str]


def explained(result: Any, rules: Sequence[Rule]) -> str | None:
    """The reason of ``result``'s differences when every one of them is known by ``rules``, else None.
    A generated case (``label~n``) is matched by its base request's name."""
    name_ = result.case.name
    base = name_.split("~")[0] + ("]" if "~" in name_ else "")
    for name, what, why in rules:
        if not isinstance(what, str) and re.search(name, base) and what(result):
            return why
    reasons = []
    for diff in result.differences:
        hit = [why for name, what, why in rules
               if isinstance(what, str) and re.search(name, base) and re.search(what, diff)]
        if not hit:
            return None
        reasons.append(hit[0])
    return "; ".join(sorted(set(reasons)))


def long_run_arguments(doc: str | None) -> argparse.ArgumentParser:
    """The options every long run takes (more may be added to the parser)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1000, help="generated cases besides the CI set")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-ci-set", action="store_true", help="the generated cases only")
    ap.add_argument("--out", type=Path, help="write every case's two answers here")
    return ap


def report(results: Sequence[Any], explain: Callable[[Any], str | None], out: Path | None,
           theirs: str) -> tuple[list[Any], list[Any]]:
    """Each unexplained difference printed, then the explained ones; every case's two answers written
    to ``out`` (``theirs``: the reference's label there). Returns (unexplained, explained)."""
    bad = [r for r in results if r.differences and not explain(r)]
    ok = [r for r in results if r.differences and explain(r)]
    if out:
        out.write_text("".join(f"{r.case.name}\n  rmqpy: {r.ours}\n  {theirs + ':':6} {r.theirs}\n" for r in results))
    for r in bad:
        print("UNEXPLAINED", r.case.name, "; ".join(r.differences))
    for r in ok:
        print("explained  ", r.case.name, f"[{explain(r)}]")
    return bad, ok
