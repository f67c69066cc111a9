"""The broker-identity files of controller mode (Java ``BrokerMetadata`` and ``TempBrokerMetadata``
over ``MetadataFile``), in Java's format and place.

A broker's id in its replica set is given by the controller once and kept in
``<storePathRootDir>/brokerIdentity`` (``storePathBrokerIdentity``): ``cluster#brokerName#id``,
UTF-8, no line end. While the id is being applied for, ``brokerIdentity-temp`` holds
``cluster#brokerName#id#registerCheckCode``, the check code being ``brokerAddr;timestampMillis``.
Written as Java's ``writeToFile``: the file is deleted, then written through ``MixAll.string2File``
(the previous content, if any, to ``<file>.bak``: none after the delete). A file that cannot be
read (absent, or not the fields above) reads as not loaded, as Java's ``isLoaded`` after a failed
``readFromFile``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from rmqpy.common.filewrite import write_file_atomically

IDENTITY_FILE = "brokerIdentity"
TEMP_SUFFIX = "-temp"


def identity_path(store_root: str, configured: str | None = None) -> str:
    """Java ``MessageStoreConfig.getStorePathBrokerIdentity``."""
    return configured or os.path.join(store_root, IDENTITY_FILE)


@dataclass(frozen=True)
class BrokerIdentity:
    """What ``brokerIdentity`` holds; ``register_check_code`` only in the temp file."""
    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str | None = None

    def encode(self) -> str:
        text = f"{self.cluster_name}#{self.broker_name}#{self.broker_id}"
        return text if self.register_check_code is None else f"{text}#{self.register_check_code}"

    @classmethod
    def decode(cls, text: str, temp: bool = False) -> BrokerIdentity:
        """ValueError unless ``text`` holds the fields of the file (four with ``temp``)."""
        parts = text.split("#")
        if len(parts) < (4 if temp else 3) or not parts[0] or not parts[1]:
            raise ValueError(f"not a broker identity: {text[:200]!r}")
        code = parts[3] if temp else None
        if temp and not code:
            raise ValueError(f"no register check code: {text[:200]!r}")
        return cls(parts[0], parts[1], int(parts[2]), code)


class IdentityFile:
    """One of the two files: read, written and cleared as Java's ``MetadataFile``."""

    def __init__(self, path: str, temp: bool = False) -> None:
        self.path = path
        self.temp = temp
        self.identity: BrokerIdentity | None = None

    @property
    def loaded(self) -> bool:
        return self.identity is not None

    def read(self) -> BrokerIdentity | None:
        """The file's identity (kept as :attr:`identity`); None when absent. ValueError/OSError
        for a file that is there but cannot be read as one."""
        self.identity = None
        if not os.path.exists(self.path):
            return None
        with open(self.path, encoding="utf-8") as fh:
            self.identity = BrokerIdentity.decode(fh.read(), self.temp)
        return self.identity

    def write(self, identity: BrokerIdentity) -> None:
        if self.temp != (identity.register_check_code is not None):
            raise ValueError("the temp file, and only it, holds a register check code")
        if os.path.exists(self.path):
            os.remove(self.path)
        write_file_atomically(self.path, identity.encode())
        self.identity = identity

    def clear(self) -> None:
        self.identity = None
        if os.path.exists(self.path):
            os.remove(self.path)


def identity_files(path: str) -> tuple[IdentityFile, IdentityFile]:
    """``brokerIdentity`` and ``brokerIdentity-temp`` for the identity path ``path``."""
    return IdentityFile(path), IdentityFile(path + TEMP_SUFFIX, temp=True)
