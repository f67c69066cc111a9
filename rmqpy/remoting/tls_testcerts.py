"""Certificates for tests and the soak bench: CAs, server and client certificates, PEM files.

Not used by the servers. Keys are RSA 2048 (the JDK's client handles them everywhere);
``encrypted_pkcs8`` writes a key as an encrypted PKCS#8 PEM (``BEGIN ENCRYPTED PRIVATE KEY``).
"""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_KEYS: list[Any] = []


def _key(fresh: bool = False) -> Any:
    # RSA generation is the slow part of a test: reuse a few keys unless a fresh one is asked for
    if fresh or len(_KEYS) < 6:
        k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if not fresh:
            _KEYS.append(k)
        return k
    _KEYS.append(_KEYS.pop(0))
    return _KEYS[0]


@dataclass
class Issued:
    cert: x509.Certificate
    key: Any

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self, password: str | None = None, legacy_pbe: bool = False) -> bytes:
        """PKCS#8 PEM; encrypted with ``password`` (PBES2/AES-256, or PBE-SHA1-3DES with legacy_pbe)."""
        if password is None:
            enc: Any = serialization.NoEncryption()
        elif legacy_pbe:
            enc = (serialization.PrivateFormat.PKCS8.encryption_builder()
                   .key_cert_algorithm(serialization.pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC)
                   .kdf_rounds(2048).build(password.encode()))
        else:
            enc = serialization.BestAvailableEncryption(password.encode())
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)

    @property
    def fingerprint(self) -> str:
        return self.cert.fingerprint(hashes.SHA256()).hex()

    def write(self, directory: Path, name: str, password: str | None = None,
              legacy_pbe: bool = False) -> tuple[Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = directory / f"{name}.pem", directory / f"{name}.key"
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem(password, legacy_pbe))
        return cert, key


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "rmqpy tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn: str = "rmqpy test CA") -> Issued:
    key = _key()
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return Issued(cert, key)


def issue(ca: Issued, cn: str, server: bool = True, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
          key: Any = None, fresh_key: bool = False) -> Issued:
    key = key or _key(fresh_key)
    now = datetime.datetime.now(datetime.timezone.utc)
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    b = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca.cert.subject)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=90))
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                               else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
         .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Issued(b.sign(ca.key, hashes.SHA256()), key)
