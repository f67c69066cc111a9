"""White remote addresses of plain ACL, with the grammar of Java's ``RemoteAddressStrategyFactory``.

A pattern is one of: blank (matches nothing), ``*`` / ``*.*.*.*`` / ``*:*:*:*:*:*:*:*``
(matches everything), one address (``192.168.0.1``, ``::1``), a comma list of addresses
(``192.168.0.1,192.168.0.2``), a brace list on the last part (``192.168.1.{1,2,3}``,
``2001:db8::{1,2}``), or a range: ``*`` or ``a-b`` in one IPv4 part after the first
(``192.168.*.*``, ``10.10.103.1-200``, ``192.168.1-10.*``), the parts after it ignored, as in Java;
IPv6 ranges likewise on 16-bit groups. A bad pattern raises :class:`AclError` when the file is
loaded, so a typo never opens or closes an address silently.
"""
from __future__ import annotations

import ipaddress
from typing import Callable

from rmqpy.acl.permission import AclError

Matcher = Callable[[str], bool]
_ALL = ("*", "*.*.*.*", "*:*:*:*:*:*:*:*")


def _never(_addr: str) -> bool:
    return False


def _always(_addr: str) -> bool:
    return True


def _normal(addr: str) -> str | None:
    """The canonical text of an IPv4 or IPv6 address, None for anything else."""
    try:
        ip = ipaddress.ip_address(addr.strip())
    except ValueError:
        return None
    return ip.exploded.upper()


def _bad(pattern: str) -> AclError:
    return AclError(f"Netaddress examine Exception netaddress is {pattern}", "getRemoteAddressStrategy")


def matcher(pattern: str | None) -> Matcher:
    """A predicate on a peer's address text for ``pattern`` (raises AclError when malformed)."""
    if pattern is None or not str(pattern).strip():
        return _never
    pattern = str(pattern).strip()
    if pattern in _ALL:
        return _always
    if pattern.endswith("}"):
        head, sep, rest = pattern.rpartition("{")
        sep_char = ":" if ":" in pattern else "."
        if not sep or not (head.endswith(sep_char)) or (sep_char == "." and head.count(".") != 3):
            raise _bad(pattern)
        return _one_of(pattern, [head + item for item in rest[:-1].split(",") if item])
    if "," in pattern:
        return _one_of(pattern, [p for p in pattern.split(",") if p])
    if "*" in pattern or "-" in pattern:
        return _range(pattern)
    one = _normal(pattern)
    if one is None:
        raise _bad(pattern)
    return lambda addr: _normal(addr) == one


def _one_of(pattern: str, addrs: list[str]) -> Matcher:
    allowed = set()
    for a in addrs:
        n = _normal(a)
        if n is None:
            raise _bad(pattern)
        allowed.add(n)
    if not allowed:
        raise _bad(pattern)
    return lambda addr: _normal(addr) in allowed


def _span(value: str, top: int, base: int, pattern: str) -> tuple[int, int] | None:
    """(start, end) for ``*`` or ``a-b`` in one part, None for a plain number."""
    value = value.strip()
    if value == "*":
        return 0, top
    if "-" in value:
        lo, _, hi = value.partition("-")
        try:
            start, end = int(lo, base), int(hi, base)
        except ValueError:
            raise _bad(pattern) from None
        if not (0 <= start <= end <= top) or end == 0:
            raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {start} , "
                           f"end is {end}", "RangeRemoteAddressStrategy")
        return start, end
    return None


def _range(pattern: str) -> Matcher:
    if ":" in pattern:
        return _range6(pattern)
    parts = pattern.split(".")
    if len(parts) != 4:
        raise _bad(pattern)
    for index in (1, 2, 3):
        span = _span(parts[index], 255, 10, pattern)
        if span is None:
            continue
        head = parts[:index]
        if not all(p.strip().isdigit() and 0 <= int(p) <= 255 for p in head):
            raise _bad(pattern)
        prefix = [int(p) for p in head]
        start, end = span

        def match(addr: str, prefix: list[int] = prefix, index: int = index, start: int = start, end: int = end) -> bool:
            try:
                ip = ipaddress.IPv4Address(addr.strip())
            except ValueError:
                return False
            octets = list(ip.packed)
            return octets[:index] == prefix and start <= octets[index] <= end
        return match
    raise _bad(pattern)


def _range6(pattern: str) -> Matcher:
    groups = pattern.split(":")
    for index, group in enumerate(groups):
        span = _span(group, 0xFFFF, 16, pattern)
        if span is None:
            continue
        if "::" in ":".join(groups[:index]) or index == 0:
            raise _bad(pattern)  # the groups before the range must be written out
        try:
            prefix = [int(g, 16) for g in groups[:index]]
        except ValueError:
            raise _bad(pattern) from None
        start, end = span

        def match(addr: str, prefix: list[int] = prefix, index: int = index, start: int = start, end: int = end) -> bool:
            try:
                ip = ipaddress.IPv6Address(addr.strip())
            except ValueError:
                return False
            words = [int.from_bytes(ip.packed[i:i + 2], "big") for i in range(0, 16, 2)]
            return words[:index] == prefix and start <= words[index] <= end
        return match
    raise _bad(pattern)
