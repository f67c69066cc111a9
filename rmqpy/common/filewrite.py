"""Writing a config or state file so that a crash never leaves it half-written (Java's
``MixAll.string2File``): the text goes to ``<path>.tmp`` and is fsynced, the current file is
copied to ``<path>.bak``, and the temporary file replaces it. Copied, not renamed: the file
itself never disappears (a ``-c`` file is read without a ``.bak`` fallback)."""
from __future__ import annotations

import os


def write_file_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    if os.path.exists(path):
        with open(path, "rb") as src, open(path + ".bak", "wb") as bak:
            bak.write(src.read())
    os.replace(tmp, path)
