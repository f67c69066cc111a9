"""Which implementation of the batch put path's per-message loops runs (issue 29 item 1).

``rmqpy._speedups`` is an optional C extension (``rmqpy/_speedups.c``, built by ``pip install``
where a C compiler is found): record encode, batch body decode, properties parse, index key hashes
and entries, consume queue units. The pure-Python functions it stands in for stay the reference
(the unit suite checks the two byte for byte) and run where it is missing, with one log line
saying so, or when ``RMQPY_PURE_PYTHON=1`` asks for them (tests, comparisons, a suspected fault).
"""
from __future__ import annotations

import logging
import os
from types import ModuleType

log = logging.getLogger(__name__)

#: set to 1 (or any non-empty value but 0) to run the pure-Python loops although the extension is built
PURE_ENV = "RMQPY_PURE_PYTHON"


def _load() -> tuple[ModuleType | None, str]:
    """The extension module, or None and why not."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None, f"{PURE_ENV} is set"
    try:
        from rmqpy import _speedups
    except ImportError as e:
        log.warning("rmqpy: the compiled batch loops (rmqpy._speedups) are not built (%s); "
                    "the pure Python path runs", e)
        return None, f"not built: {e}"
    return _speedups, "built"


native, reason = _load()


def describe() -> str:
    """One line for ``--version`` and the README: which path the store's batch loops take."""
    if native is not None:
        return "store loops: compiled C (rmqpy._speedups)"
    return f"store loops: pure Python ({reason})"
