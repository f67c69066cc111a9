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
        """PKCS#8 PEM; encrypted with ``password`` (PBES2/AES-256, or PBE-SHA1-3DES with legacy_pbe,
        the PBES1 scheme that ``openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES`` writes and that older
        netty (client 4.9.x) needs: it cannot read PBES2)."""
        if password is None:
            enc: Any = serialization.NoEncryption()
        elif legacy_pbe:
            return pbes1_sha1_3des_pem(self.key, password)
        else:
            enc = serialization.BestAvailableEncryption(password.encode())
        pem: bytes = self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)
        return pem

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


# ------------------------------------------------------------------ PKCS#8 with PBES1 (PKCS#12 PBE)

_PBE_SHA1_3DES_OID = bytes([0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x01, 0x03])  # 1.2.840.113549.1.12.1.3


def _der(tag: int, body: bytes) -> bytes:
    n = len(body)
    if n < 0x80:
        return bytes([tag, n]) + body
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + body


def pkcs12_kdf(password: str, salt: bytes, purpose: int, iterations: int, size: int) -> bytes:
    """RFC 7292 appendix B.2 with SHA-1 (purpose 1: key, 2: IV)."""
    import hashlib
    u, v = 20, 64

    def fill(data: bytes) -> bytes:  # repeated to a multiple of v bytes
        n = v * -(-len(data) // v)
        return (data * (n // len(data) + 1))[:n] if data else b""

    d = bytes([purpose]) * v
    pw = password.encode("utf-16-be") + b"\0\0"
    i = bytearray(fill(salt) + fill(pw))
    out = b""
    while len(out) < size:
        a = d + bytes(i)
        for _ in range(iterations):
            a = hashlib.sha1(a).digest()
        out += a
        b = int.from_bytes((a * (v // u + 1))[:v], "big")
        for k in range(0, len(i), v):
            block = (int.from_bytes(i[k:k + v], "big") + b + 1) % (1 << (8 * v))
            i[k:k + v] = block.to_bytes(v, "big")
    return out[:size]


def pbes1_sha1_3des_pem(key: Any, password: str, iterations: int = 2048) -> bytes:
    """``key`` as an EncryptedPrivateKeyInfo PEM with pbeWithSHAAnd3-KeyTripleDES-CBC."""
    import base64
    import os

    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, modes
    try:
        from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    except ImportError:  # cryptography < 43
        from cryptography.hazmat.primitives.ciphers.algorithms import TripleDES  # type: ignore[no-redef, unused-ignore]

    plain = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    salt = os.urandom(8)
    k, iv = pkcs12_kdf(password, salt, 1, iterations, 24), pkcs12_kdf(password, salt, 2, iterations, 8)
    padder = padding.PKCS7(64).padder()
    data = padder.update(plain) + padder.finalize()
    enc = Cipher(TripleDES(k), modes.CBC(iv)).encryptor()
    encrypted = enc.update(data) + enc.finalize()
    params = _der(0x30, _der(0x04, salt) + _der(0x02, iterations.to_bytes(iterations.bit_length() // 8 + 1, "big")))
    info = _der(0x30, _der(0x30, _der(0x06, _PBE_SHA1_3DES_OID) + params) + _der(0x04, encrypted))
    b64 = base64.encodebytes(info).decode().replace("\n", "")
    lines = [b64[j:j + 64] for j in range(0, len(b64), 64)]
    return ("-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + "\n".join(lines)
            + "\n-----END ENCRYPTED PRIVATE KEY-----\n").encode()


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
