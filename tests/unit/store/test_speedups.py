"""The compiled batch loops (``rmqpy._speedups``) against the pure-Python reference, byte for byte
(issue 29 item 1): hypothesis draws well-formed and hostile records, batch bodies, properties
strings, index keys and entries, consume queue units; both paths must give the same bytes, or
raise the same exception type, and the extension must never take the process down.

Where the extension is not built (no compiler) the comparisons are skipped; the fallback tests
at the end run either way."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqpy import speedups
from rmqpy.protocol import message
from rmqpy.protocol.message import encode_batch_body, host_bytes
from rmqpy.store import batch_layout, consume_queue, index, message_store
from rmqpy.store.index import IndexFile, build_key, index_key_hash

from .conftest import StoreHarness
from .test_batch_put_bytes import _SMALL, _files

try:
    from rmqpy import _speedups as ext
except ImportError:  # no compiler where this was installed: only the fallback tests below run
    ext = None

needs_ext = pytest.mark.skipif(ext is None, reason="rmqpy._speedups is not built")
ROOT = Path(__file__).resolve().parents[3]


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What a call gives: ("ok", value) or ("raised", exception type)."""
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001 - the exception's type is what is compared
        return "raised", type(e)


def same(pure: Callable[..., Any], compiled: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    a, b = outcome(pure, *args), outcome(compiled, *args)
    assert a == b, (args, a, b)
    return a


# --------------------------------------------------------------------------- properties

_prop_chars = st.sampled_from(["a", "K", "\x01", "\x02", "\x00", " ", "\u00e9", "\u4e3b", "\U0001f600", "\ud800"])
_prop_text = st.one_of(st.text(_prop_chars, max_size=40), st.text(max_size=40))


@needs_ext
@settings(max_examples=400, deadline=None)
@given(st.one_of(_prop_text, st.binary(max_size=40), _prop_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
                 st.none(), st.just(b""), st.just(bytearray(b"a\x01b")), st.integers(0, 5)))
def test_string_to_properties(s):
    kind, value = same(message._py_string_to_properties, ext.string_to_properties, s)
    if kind == "ok":
        assert list(value.items()) == list(ext.string_to_properties(s).items())  # the same order


# --------------------------------------------------------------------------- batch body

_items = st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), st.binary(max_size=64), _prop_text.filter(
    lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t))), max_size=6)


@st.composite
def _batch_bodies(draw: Any) -> bytes:
    body = bytearray(encode_batch_body(draw(_items)))
    for _ in range(draw(st.integers(0, 3))):  # hostile: bytes changed, cut or added
        how = draw(st.sampled_from(["flip", "cut", "add"]))
        if how == "flip" and body:
            body[draw(st.integers(0, len(body) - 1))] = draw(st.integers(0, 255))
        elif how == "cut":
            del body[draw(st.integers(0, len(body))):]
        else:
            body += draw(st.binary(max_size=24))
    return bytes(body)


@needs_ext
@settings(max_examples=400, deadline=None)
@given(st.one_of(_batch_bodies(), st.binary(max_size=80)))
def test_decode_batch_items(body):
    same(message._py_decode_batch_items, ext.decode_batch_items, body)


# --------------------------------------------------------------------------- records

_INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
_wide = st.one_of(_INT32, st.integers(-(1 << 70), 1 << 70))  # hostile: past the Java type
_HOSTS = [host_bytes(("10.1.2.3", 5555)), host_bytes(("127.0.0.1", 10911))]


@st.composite
def _record_args(draw: Any) -> tuple[Any, ...]:
    hostile = draw(st.booleans())
    topic = draw(st.sampled_from([b"T", b"\xe4\xb8\xbb" * 3, b"x" * 127] + ([b"x" * 128] if hostile else [])))
    records = []
    for flag, body, props in draw(st.lists(st.tuples(_wide if hostile else _INT32, st.binary(max_size=80),
                                                     st.binary(max_size=40)), max_size=6)):
        size = 91 + len(body) + len(topic) + len(props)
        if hostile and draw(st.integers(0, 5)) == 0:
            choice = draw(st.sampled_from(["size", "props", "big props", "flag", "body"]))
            if choice == "size":
                size += draw(st.integers(-3, 3))
            elif choice == "props":
                props = props.decode("latin-1")  # a str: len() works, b"".join does not
            elif choice == "big props":
                props = b"p" * 32768
                size = 91 + len(body) + len(topic) + len(props)
            elif choice == "flag":
                flag = draw(st.sampled_from([1.5, None, "1"]))
            else:
                body = body.decode("latin-1")
        records.append((flag, body, props, size))
    total = sum(r[3] for r in records) + (draw(st.integers(-2, 2)) if hostile else 0)
    fields = [draw(_wide if hostile else _INT32) for _ in range(3)]  # queue_id, sys_flag, reconsume_times
    stamps = [draw(st.one_of(_INT64, st.integers(1 << 63, 1 << 64)) if hostile else _INT64) for _ in range(2)]
    offsets = [draw(st.one_of(st.integers(0, 1 << 40), st.integers((1 << 63) - 50, 1 << 63) if hostile
                              else st.integers(0, 1 << 40))) for _ in range(2)]
    return (records, total, topic, fields[0], fields[1], stamps[0], _HOSTS[0], stamps[1], _HOSTS[1], fields[2],
            offsets[0], offsets[1])


@needs_ext
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_record_args())
def test_encode_batch_records(args):
    same(message._py_encode_batch_records, ext.encode_batch_records, *args)


@needs_ext
@pytest.mark.parametrize("props,extra,error", [("p\x01v", 0, TypeError), ("p\x01v", 1, ValueError),
                                               (b"p\x01v", 1, ValueError), (memoryview(b"p\x01v"), 0, None)])
def test_encode_batch_records_checks_the_total_before_the_properties_type(props, extra, error):
    """b"".join of the pure path meets a str's properties only after the total was checked."""
    size = 91 + 3 + 1 + 3
    args = ([(0, b"abc", props, size)], size + extra, b"T", 1, 0, 5, _HOSTS[0], 6, _HOSTS[1], 0, 0, 0)
    kind, value = same(message._py_encode_batch_records, ext.encode_batch_records, *args)
    assert (kind, value) == (("raised", error) if error else ("ok", value))


@needs_ext
def test_encode_batch_records_refuses_what_is_not_an_ipv4_pair():
    """The dispatching wrapper sends IPv6 hosts to the pure path; the C function itself refuses them."""
    with pytest.raises(ValueError):
        ext.encode_batch_records([], 0, b"T", 0, 0, 0, host_bytes(("::1", 7)), 0, _HOSTS[1], 0, 0, 0)
    with pytest.raises(TypeError):
        ext.encode_batch_records([], 0)


# --------------------------------------------------------------------------- a batch's layout

_layout_item = st.tuples(_INT32, st.binary(max_size=40), _prop_text.filter(
    lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t))).map(
    lambda t: (t[0], t[1], t[2].encode("utf-8"), t[2]))


@st.composite
def _layout_args(draw: Any) -> tuple[Any, ...]:
    items: list[Any] = draw(st.lists(_layout_item, max_size=6))
    if items and draw(st.integers(0, 4)) == 0:  # hostile: what decode_batch_items never gives
        i = draw(st.integers(0, len(items) - 1))
        flag, body, pb, ps = items[i]
        items[i] = draw(st.sampled_from([(flag, body, bytearray(pb), ps), [flag, body, pb, ps], (flag, body, pb),
                                         (flag, body, pb, pb), (flag, body.decode("latin-1"), pb, ps), None,
                                         (flag, body, b"p" * 32760, ps)]))
    batch_s = draw(st.sampled_from(["", "WAIT\x01true\x02", "TAGS\x01bt\x02KEYS\x01a b", "x"]))
    batch_props = message._py_string_to_properties(batch_s) if batch_s else None
    if batch_props is not None and draw(st.integers(0, 5)) == 0:
        batch_props["TAGS"] = draw(st.sampled_from([5, b"t", ""]))  # hostile: values that are not str
    return (items, batch_s.encode(), batch_props, draw(st.integers(0, 300)), draw(st.integers(-1, 50)))


@needs_ext
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_layout_args())
def test_batch_layout(args):
    """The compiled layout gives the pure one's answer, or declines (NotImplemented) inputs of other
    types, which the wrapper hands to the pure function: the wrapper's answer is always the pure one's."""
    compiled = outcome(ext.batch_layout, *args)
    if compiled != ("ok", NotImplemented):
        same(batch_layout._py_batch_layout, ext.batch_layout, *args)
    same(batch_layout._py_batch_layout, batch_layout.batch_layout, *args)


# --------------------------------------------------------------------------- index

_key_chars = st.sampled_from(["a", "#", "0", "F", "\u00e9", "\u4e3b", "\U0001f600", "\ud83d", "\udc00", "\x00"])
_keys = st.one_of(st.text(_key_chars, max_size=40), st.text(max_size=40), st.just("K" * 5000))


@needs_ext
@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(_key_chars, max_size=12), st.just("TopicTest")), st.lists(_keys, max_size=8))
def test_index_key_hashes(topic, keys):
    want = [index_key_hash(build_key(topic, k)) for k in keys]
    assert ext.index_key_hashes(topic, keys) == want
    assert ext.index_key_hashes(topic, tuple(keys)) == want


@needs_ext
def test_index_key_hashes_refuses_what_is_not_a_str():
    for args in (("T", [b"k"]), (b"T", ["k"]), ("T", 5), ("T",)):
        with pytest.raises(TypeError):
            ext.index_key_hashes(*args)


_entries = st.lists(st.tuples(st.one_of(st.integers(0, (1 << 31) - 1), st.integers(-(1 << 31), -1),
                                        st.integers(1 << 31, 1 << 66)),
                              st.one_of(st.integers(0, 1 << 40), st.integers(1 << 63, 1 << 64))),
                    min_size=1, max_size=12)


def _index_file(root: str, name: str, prefill: list[tuple[int, int]]) -> IndexFile:
    f = IndexFile(os.path.join(root, name), 7, 16)
    for h, phy in prefill:
        f.add_key_hash(h, phy, 1_700_000_000_000)
    f._write_header()
    return f


@needs_ext
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, (1 << 31) - 1), st.integers(0, 1 << 40)), min_size=1, max_size=6),
       _entries, st.integers(0, 5_000_000))
def test_index_entries(monkeypatch, prefill, entries, later_ms):
    """``IndexFile.add_key_hashes`` past a file's first entry, both ways: the same file bytes and
    fields, or the same exception type and fields (16 entries per file: some draws do not fit and
    must be refused the same way). After an error the bytes are not compared: ``Struct.pack_into``
    leaves part of the failing entry written (a long past 2^63 is written, then refused), C
    refuses it before writing."""
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        results = []
        for name, native in (("c", ext), ("py", None)):
            monkeypatch.setattr(index, "_native", native)
            f = _index_file(tmp, name, prefill)
            results.append(outcome(f.add_key_hashes, entries, 1_700_000_000_000 + later_ms))
            files.append(f)
        assert results[0] == results[1]
        c, py = files
        if results[0][0] == "ok":
            assert bytes(c.mm) == bytes(py.mm)
        fields = ("begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset", "hash_slot_count",
                  "index_count", "dirty")
        assert [getattr(c, a) for a in fields] == [getattr(py, a) for a in fields]
        for f in files:
            f.close()


@needs_ext
def test_index_entries_stay_inside_the_buffer():
    """Offsets past a buffer that is shorter than its slot and entry counts say: struct.error, no write."""
    buf = bytearray(64)
    with pytest.raises(struct.error):
        ext.index_add_entries(buf, 1 << 40, 2, [(5, 1)], 0)
    with pytest.raises(struct.error):
        ext.index_add_entries(buf, 4, 2, [(5, 1)], 0)  # the entry area starts at 56: no room for 20 bytes
    with pytest.raises(struct.error):
        ext.index_add_entries(buf, 4, 2, [(5, 1)], 1 << 40)  # diff past an int
    with pytest.raises(ZeroDivisionError):
        ext.index_add_entries(buf, 0, 2, [(5, 1)], 0)
    with pytest.raises(TypeError):
        ext.index_add_entries(b"\x00" * 64, 4, 2, [(5, 1)], 0)  # not writable
    with pytest.raises((TypeError, ValueError)):
        ext.index_add_entries(buf, 4, 2, [(5,)], 0)
    assert buf == bytearray(64)


# --------------------------------------------------------------------------- consume queue

@needs_ext
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(_INT64, st.integers(1 << 63, 1 << 64)), _wide, _INT64, st.integers(0, 9),
                          st.none()), max_size=10))
def test_consume_queue_units(units):
    pack = consume_queue.UNIT.pack
    same(lambda us: b"".join([pack(u[0], u[1], u[2]) for u in us]), ext.consume_queue_units, units)


@needs_ext
def test_consume_queue_units_refuse_short_units():
    for units in ([(1, 2)], [5], None):
        with pytest.raises((TypeError, IndexError)):
            ext.consume_queue_units(units)


# --------------------------------------------------------------------------- whole batch puts

def _pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's batch path on the pure-Python loops, as without the extension."""
    monkeypatch.setattr(message, "_native", None)
    monkeypatch.setattr(index, "_native", None)
    monkeypatch.setattr(consume_queue, "_native", None)
    monkeypatch.setattr(batch_layout, "_native", None)
    monkeypatch.setattr(message_store, "string_to_properties", message._py_string_to_properties)
    monkeypatch.setattr(message_store, "decode_batch_items", message._py_decode_batch_items)


@needs_ext
def test_batch_puts_write_the_same_files_both_ways(tmp_path, monkeypatch):
    """The same batches (UNIQ_KEYs only, as a producer's; then with KEYS and tags) put on the compiled
    and on the pure loops: every store file byte for byte, across consume queue and index file ends."""
    def put_all(root: Path) -> list[Any]:
        h = StoreHarness(root, **_SMALL)
        s = h.open()
        answers = []
        for b in range(6):
            items = [(i, bytes([i]) * 100, {"UNIQ_KEY": "7F00000100002A9F0000%012X" % (b * 10 + i),
                                            **({"TAGS": "t%d" % i, "KEYS": "k%d x" % i} if b % 2 else {})})
                     for i in range(9)]
            out: list[Any] = []
            s.put_messages(message.MessageExtBatch(topic="T", queue_id=b % 2, body=encode_batch_body(items),
                                                   properties_string="WAIT\x01true\x02", born_host=("10.1.2.3", 5),
                                                   born_timestamp=77)).addCallback(out.append)
            a = out[0].append_message_result
            answers.append((out[0].put_message_status, a.msg_id, a.logics_offset, a.wrote_offset))
            h.clock.advance(1.3)
        h.close()
        return answers

    compiled = put_all(tmp_path / "c")
    _pure(monkeypatch)
    assert put_all(tmp_path / "py") == compiled
    assert _files(tmp_path / "c") == _files(tmp_path / "py")


# --------------------------------------------------------------------------- fallback

def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)


def test_the_environment_variable_forces_the_pure_path():
    run = _python("from rmqpy import speedups; from rmqpy.protocol import message as m; "
                  "print(speedups.native, m.string_to_properties is m._py_string_to_properties, speedups.describe())",
                  RMQPY_PURE_PYTHON="1")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split(" ", 2)[:2] == ["None", "True"]
    assert "pure Python (RMQPY_PURE_PYTHON is set)" in run.stdout
    assert run.stderr == ""


def test_without_the_extension_one_line_says_so_and_the_pure_functions_run():
    """As on a machine without a compiler: the import fails, one warning line (stderr before logging is set
    up), the pure functions are the ones bound (test_batch_puts_write_the_same_files_both_ways: same files)."""
    code = ("import sys; sys.modules['rmqpy._speedups'] = None\n"
            "from rmqpy import speedups\n"
            "from rmqpy.protocol import message as m\n"
            "assert speedups.native is None and m.decode_batch_items is m._py_decode_batch_items\n"
            "print(speedups.describe())")
    run = _python(code, RMQPY_PURE_PYTHON="")
    assert run.returncode == 0, run.stderr
    assert "store loops: pure Python (not built" in run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "the pure Python path runs" in lines[0], run.stderr


def test_describe_names_the_path_that_runs():
    assert speedups.describe() == ("store loops: compiled C (rmqpy._speedups)" if speedups.native is not None
                                   else f"store loops: pure Python ({speedups.reason})")


@needs_ext
def test_python_code_that_changes_the_input_during_a_call_does_not_crash():
    """Objects whose __eq__, __mod__ or __getitem__ empty the list being read, or resize a host
    bytearray: the C functions hold copies and references, so the call returns or raises."""
    records: list[Any] = []

    class Size(int):
        def __eq__(self, other: object) -> bool:
            records.clear()
            return True

        __hash__ = int.__hash__

    class Late:
        def __index__(self) -> int:
            host[:] = b""  # the born host, already read
            return 1

    host = bytearray(_HOSTS[0])
    records.extend([[0, b"abc", b"p", Size(98)], (1, b"de", b"", 94.0)])
    for args in (([*records], 192), (records, 192)):
        r = outcome(ext.encode_batch_records, args[0], args[1], b"T", 0, 0, 0, host, Late(), _HOSTS[1], 0, 0, 0)
        assert r[0] in ("ok", "raised")

    entries: list[Any] = []

    class Hash(int):
        def __mod__(self, other: Any) -> int:
            entries.clear()
            return int(self) % other

    entries.extend([[Hash(5), 1_000_000 + i] for i in range(3)] + [(Hash(6), 2)])  # c12ebdd: SIGSEGV here
    buf = bytearray(40 + 4 * 4 + 20 * 8)
    assert outcome(ext.index_add_entries, buf, 4, 2, entries, 0)[0] in ("ok", "raised")

    units: list[Any] = []

    class Unit(tuple):
        def __getitem__(self, i: Any) -> Any:
            units.clear()
            return tuple.__getitem__(self, i)

    units.extend([Unit((1, 2, 3)), Unit((4, 5, 6))])
    assert outcome(ext.consume_queue_units, units)[0] in ("ok", "raised")
