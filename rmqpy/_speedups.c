/* rmqpy._speedups: the batch put path's per-message loops in C (issue 29 item 1).
 *
 * Each function is a drop-in for a pure-Python function that stays the reference (named in its
 * docstring); tests/unit/store/test_speedups.py checks the two against each other byte for byte,
 * errors included, with hypothesis. Nothing here trusts its input: every length and offset is
 * checked before a byte is read or written, and a value the pure path would refuse raises the
 * same exception type (struct.error, ValueError, TypeError) instead.
 *
 * Plain CPython C API, no third-party headers: the body CRC32 calls zlib.crc32 (Python's own
 * zlib module) so that building needs only a C compiler and Python's headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  /* Linux 5.14 */
#endif
#endif

static PyObject *tags_key;      /* "TAGS" */
static PyObject *struct_error;  /* struct.error: what the pure path's Struct.pack raises */
static PyObject *zlib_crc32;    /* zlib.crc32 */

#define MAGIC_V1 0xDAA320A7u
#define MAX_TOPIC_V1 127
#define INDEX_HEADER 40
#define INDEX_ITEM 20

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static uint32_t get32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* An integer for a struct field in [lo, hi]: struct.error otherwise, as Struct.pack. */
static int field(PyObject *obj, long long lo, long long hi, long long *out) {
    if (!PyLong_Check(obj) && !PyIndex_Check(obj)) {
        PyErr_SetString(struct_error, "required argument is not an integer");
        return -1;
    }
    PyObject *n = PyNumber_Index(obj);
    if (n == NULL) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(n, &overflow);
    Py_DECREF(n);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(struct_error, "argument out of range [%lld, %lld]", lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

#define I32(obj, out) field((obj), INT32_MIN, INT32_MAX, (out))
#define I64(obj, out) field((obj), INT64_MIN, INT64_MAX, (out))

/* An 8-byte host (ip + port) for a struct "8s" field: bytes or bytearray, else struct.error. Copied
 * at once: a bytearray may change under any Python code that runs later (an __index__). */
static int host8(PyObject *obj, unsigned char *out) {
    if (PyBytes_Check(obj) && PyBytes_GET_SIZE(obj) == 8) {
        memcpy(out, PyBytes_AS_STRING(obj), 8);
        return 0;
    }
    if (PyByteArray_Check(obj) && PyByteArray_GET_SIZE(obj) == 8) {
        memcpy(out, PyByteArray_AS_STRING(obj), 8);
        return 0;
    }
    PyErr_SetString(struct_error, "a host must be 8 bytes (bytes or bytearray)");
    return -1;
}

/* ------------------------------------------------------------------ commit log records */

typedef struct {
    long long size, flag;
    Py_buffer body, props;
    int has_body, has_props;
} record_in;

static void release_records(record_in *r, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (r[i].has_body) PyBuffer_Release(&r[i].body);
        if (r[i].has_props) PyBuffer_Release(&r[i].props);
    }
}

/* size == 91 + blen + tlen + plen, compared as the pure path compares (any object); sets r->size. */
static int size_matches(PyObject *size, long long want, record_in *r) {
    if (PyLong_Check(size)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(size, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        r->size = v;
        return !overflow && v == want;
    }
    PyObject *w = PyLong_FromLongLong(want);
    if (w == NULL) return -1;
    int eq = PyObject_RichCompareBool(size, w, Py_EQ);
    Py_DECREF(w);
    r->size = want;
    return eq;
}

/* The checks of one (flag, body, props, size) in the pure loop's order; its buffers stay held.
 * ``fields`` are queue_id, queue_offset and physical_offset of this record (Python ints). */
static int check_record(PyObject *item, Py_ssize_t tlen, PyObject *const *fields, long long qoff_add,
                        long long phy_add, record_in *r, long long *queue_id, int *deferred_type_error) {
    /* a tuple holds its items: a list could lose them to Python code the checks below run (__eq__) */
    PyObject *seq = PySequence_Tuple(item);
    if (seq == NULL) return -1;
    int rc = -1;
    if (PyTuple_GET_SIZE(seq) != 4) {
        PyErr_Format(PyExc_ValueError, "expected 4 values to unpack, got %zd", PyTuple_GET_SIZE(seq));
        goto done;
    }
    PyObject *flag = PyTuple_GET_ITEM(seq, 0), *body = PyTuple_GET_ITEM(seq, 1);
    PyObject *props = PyTuple_GET_ITEM(seq, 2), *size = PyTuple_GET_ITEM(seq, 3);
    Py_ssize_t blen = PyObject_Length(body);
    if (blen < 0) goto done;
    Py_ssize_t plen = PyObject_Length(props);
    if (plen < 0) goto done;
    int eq = size_matches(size, 91 + (long long)blen + tlen + plen, r);
    if (eq < 0) goto done;
    if (!eq) {  /* before any pack, as the pure loop */
        PyErr_SetString(PyExc_ValueError, "record size does not match its parts");
        goto done;
    }
    /* zlib.crc32(body) needs a buffer (TypeError), then the fixed part's fields (struct.error) */
    if (PyObject_GetBuffer(body, &r->body, PyBUF_SIMPLE) < 0) goto done;
    r->has_body = 1;
    if (r->body.len != blen) {  /* len() counts items of another size: not a record's body */
        PyErr_SetString(PyExc_TypeError, "a record's body must be a buffer of bytes");
        goto done;
    }
    long long qid, qoff, phy;
    if (field(size, INT32_MIN, INT32_MAX, &r->size) < 0 || I32(fields[0], &qid) < 0 || I32(flag, &r->flag) < 0
            || I64(fields[1], &qoff) < 0 || I64(fields[2], &phy) < 0)
        goto done;
    if (blen > INT32_MAX || (qoff_add && qoff > INT64_MAX - qoff_add) || (phy_add > 0 && phy > INT64_MAX - phy_add)
            || (phy_add < 0 && phy < INT64_MIN - phy_add)) {
        PyErr_SetString(struct_error, "argument out of range");
        goto done;
    }
    *queue_id = qid;
    if (plen > 32767) {
        PyErr_SetString(struct_error, "short format requires -32768 <= number <= 32767");
        goto done;
    }
    /* b"".join at the end needs the properties as a buffer: TypeError, but after the total check */
    if (PyObject_GetBuffer(props, &r->props, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        *deferred_type_error = 1;
    } else {
        r->has_props = 1;
        if (r->props.len != plen) {
            PyErr_SetString(PyExc_TypeError, "a record's properties must be a buffer of bytes");
            goto done;
        }
    }
    rc = 0;
done:
    Py_DECREF(seq);
    return rc;
}

static void write_record(unsigned char *p, const record_in *r, uint32_t crc, long long queue_id, long long qoff,
                         long long phy, const unsigned char *same, PyObject *topic) {
    Py_ssize_t tlen = PyBytes_GET_SIZE(topic), blen = r->body.len, plen = r->props.len;
    put32(p, (uint32_t)r->size);
    put32(p + 4, MAGIC_V1);
    put32(p + 8, crc & 0x7FFFFFFFu);
    put32(p + 12, (uint32_t)queue_id);
    put32(p + 16, (uint32_t)r->flag);
    put64(p + 20, (uint64_t)qoff);
    put64(p + 28, (uint64_t)phy);
    memcpy(p + 36, same, 48);
    put32(p + 84, (uint32_t)blen);
    p += 88;
    memcpy(p, r->body.buf, (size_t)blen);
    p += blen;
    *p++ = (unsigned char)tlen;
    memcpy(p, PyBytes_AS_STRING(topic), (size_t)tlen);
    p += tlen;
    p[0] = (unsigned char)((uint16_t)plen >> 8);
    p[1] = (unsigned char)plen;
    memcpy(p + 2, r->props.buf, (size_t)plen);
}

static PyObject *encode_batch_records(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 12) {
        PyErr_Format(PyExc_TypeError, "encode_batch_records() takes 12 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *topic = args[2];
    if (!PyBytes_Check(topic)) {
        PyErr_SetString(PyExc_TypeError, "topic_bytes must be bytes");
        return NULL;
    }
    Py_ssize_t tlen = PyBytes_GET_SIZE(topic);
    Py_ssize_t bl = PyObject_Length(args[6]), sl = bl < 0 ? -1 : PyObject_Length(args[8]);
    if (bl < 0 || sl < 0) return NULL;
    if (bl != 8 || sl != 8) {
        PyErr_SetString(PyExc_ValueError, "the compiled encoder takes IPv4 hosts (8 bytes) only");
        return NULL;
    }
    if (tlen > MAX_TOPIC_V1) {
        PyErr_Format(PyExc_ValueError, "topic too long for a V1 record: %zd bytes", tlen);
        return NULL;
    }
    /* the fields every record shares (sysFlag .. prepared offset: 48 bytes), packed once */
    long long sys_flag, born_ts, store_ts, reconsume;
    unsigned char born[8], store[8];
    if (I32(args[4], &sys_flag) < 0 || I64(args[5], &born_ts) < 0 || host8(args[6], born) < 0
            || I64(args[7], &store_ts) < 0 || host8(args[8], store) < 0 || I32(args[9], &reconsume) < 0)
        return NULL;
    unsigned char same[48];
    put32(same, (uint32_t)sys_flag);
    put64(same + 4, (uint64_t)born_ts);
    memcpy(same + 12, born, 8);
    put64(same + 20, (uint64_t)store_ts);
    memcpy(same + 28, store, 8);
    put32(same + 36, (uint32_t)reconsume);
    put64(same + 40, 0);
    PyObject *seq = PySequence_Tuple(args[0]);  /* a copy: Python code run below cannot shorten it */
    if (seq == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq), held = 0;
    record_in *rs = PyMem_Calloc(n ? (size_t)n : 1, sizeof(record_in));
    PyObject *out = NULL, *sum_obj = NULL;
    if (rs == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    int deferred_type_error = 0;
    long long sum = 0, queue_id = 0;
    PyObject *const fields[3] = {args[3], args[10], args[11]};  /* queue_id, queue_offset, physical_offset */
    for (Py_ssize_t i = 0; i < n; i++) {
        held = i + 1;
        if (check_record(PyTuple_GET_ITEM(seq, i), tlen, fields, (long long)i, sum, &rs[i], &queue_id,
                         &deferred_type_error) < 0)
            goto done;
        sum += rs[i].size;  /* each size < 2^31 and at most PY_SSIZE_T_MAX records: no overflow */
    }
    sum_obj = PyLong_FromLongLong(sum);
    if (sum_obj == NULL) goto done;
    int ne = PyObject_RichCompareBool(sum_obj, args[1], Py_NE);
    if (ne < 0) goto done;
    if (ne) {
        PyErr_Format(PyExc_ValueError, "batch records of %lld bytes, %R expected", sum, args[1]);
        goto done;
    }
    if (deferred_type_error) {
        PyErr_SetString(PyExc_TypeError, "record properties must be a bytes-like object");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sum);
    if (out == NULL) goto done;
    long long qoff = 0, phy = 0;
    if (n && (I64(args[10], &qoff) < 0 || I64(args[11], &phy) < 0)) {  /* checked per record above */
        Py_CLEAR(out);
        goto done;
    }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        const record_in *r = &rs[i];
        PyObject *crc = PyObject_CallOneArg(zlib_crc32, r->body.obj);
        if (crc == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        unsigned long c = PyLong_AsUnsignedLongMask(crc);
        Py_DECREF(crc);
        if (c == (unsigned long)-1 && PyErr_Occurred()) {
            Py_CLEAR(out);
            goto done;
        }
        write_record(p, r, (uint32_t)c, queue_id, qoff + i, phy, same, topic);
        p += r->size;
        phy += r->size;
    }
done:
    Py_XDECREF(sum_obj);
    release_records(rs, held);
    PyMem_Free(rs);
    Py_DECREF(seq);
    return out;
}

/* ------------------------------------------------------------------ batch body */

static int be_i32(const unsigned char *p) { return (int32_t)get32(p); }

static PyObject *decode_batch_items(PyObject *Py_UNUSED(self), PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = view.buf;
    Py_ssize_t n = view.len, pos = 0;
    PyObject *items = PyList_New(0);
    if (items == NULL) goto fail;
    while (pos < n) {
        if (pos + 20 > n) {
            PyErr_Format(PyExc_ValueError, "truncated batch item at %zd", pos);
            goto fail;
        }
        long long total = be_i32(b + pos), flag = be_i32(b + pos + 12), blen = be_i32(b + pos + 16);
        long long p = pos + 20 + blen;
        if (blen < 0 || p + 2 > n) {
            PyErr_Format(PyExc_ValueError, "bad batch item body length %lld at %zd", blen, pos);
            goto fail;
        }
        long long plen = (int16_t)(((unsigned)b[p] << 8) | b[p + 1]);
        p += 2;
        if (plen < 0 || p + plen > n) {
            PyErr_Format(PyExc_ValueError, "bad batch item properties length %lld at %zd", plen, pos);
            goto fail;
        }
        PyObject *ps = PyUnicode_DecodeUTF8((const char *)b + p, (Py_ssize_t)plen, NULL);
        if (ps == NULL) goto fail;
        if (total != p + plen - pos) {
            Py_DECREF(ps);
            PyErr_Format(PyExc_ValueError, "batch item size %lld != %lld at %zd", total, p + plen - pos, pos);
            goto fail;
        }
        PyObject *item = Py_BuildValue("(Ly#y#N)", flag, (const char *)b + pos + 20, (Py_ssize_t)blen,
                                       (const char *)b + p, (Py_ssize_t)plen, ps);
        if (item == NULL) goto fail;
        int rc = PyList_Append(items, item);
        Py_DECREF(item);
        if (rc < 0) goto fail;
        pos = (Py_ssize_t)(p + plen);
    }
    PyBuffer_Release(&view);
    return items;
fail:
    Py_XDECREF(items);
    PyBuffer_Release(&view);
    return NULL;
}

/* ------------------------------------------------------------------ properties */

static PyObject *string_to_properties(PyObject *Py_UNUSED(self), PyObject *s) {
    int truth = PyObject_IsTrue(s);
    if (truth < 0) return NULL;
    if (!truth) return PyDict_New();
    PyObject *text;
    if (PyUnicode_Check(s)) {
        text = Py_NewRef(s);
    } else {  /* bytes(s).decode("utf-8", "replace") */
        PyObject *raw = PyObject_CallOneArg((PyObject *)&PyBytes_Type, s);
        if (raw == NULL) return NULL;
        text = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), "replace");
        Py_DECREF(raw);
        if (text == NULL) return NULL;
    }
    PyObject *out = PyDict_New();
    if (out == NULL) goto fail;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), start = 0;
    while (start <= n) {
        Py_ssize_t end = PyUnicode_FindChar(text, 0x02, start, n, 1);
        if (end == -2) goto fail;
        if (end < 0) end = n;
        Py_ssize_t sep = PyUnicode_FindChar(text, 0x01, start, end, 1);
        if (sep == -2) goto fail;
        if (sep > start && sep + 1 < end) {  /* a name and a value */
            PyObject *name = PyUnicode_Substring(text, start, sep);
            PyObject *value = name ? PyUnicode_Substring(text, sep + 1, end) : NULL;
            int rc = value ? PyDict_SetItem(out, name, value) : -1;
            Py_XDECREF(name);
            Py_XDECREF(value);
            if (rc < 0) goto fail;
        }
        start = end + 1;
    }
    Py_DECREF(text);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(text);
    return NULL;
}

/* ------------------------------------------------------------------ a batch's layout */

#define MAX_PROPERTIES 32767

static uint32_t java_hash(uint32_t h, PyObject *s);

/* the str of string_to_properties (C: no call through Python); only for an exact str */
static PyObject *parse_properties(PyObject *text) { return string_to_properties(NULL, text); }

/* one message's (flag, body, pb, size) record and (offset in the batch, size, tags code, properties);
 * 0, 1 (properties too long), 2 (body too long), -1 (error), -2 (not the exact types: the caller
 * falls back to the pure function) */
static int layout_one(PyObject *item, PyObject *after_sep, PyObject *batch_props_b, PyObject *batch_props,
                      Py_ssize_t fixed, Py_ssize_t max_body, long long total, PyObject **record, PyObject **parsed,
                      long long *size_out) {
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 4) return -2;
    PyObject *flag = PyTuple_GET_ITEM(item, 0), *body = PyTuple_GET_ITEM(item, 1);
    PyObject *pb = PyTuple_GET_ITEM(item, 2), *ps = PyTuple_GET_ITEM(item, 3);
    if (!PyBytes_CheckExact(body) || !PyBytes_CheckExact(pb) || !PyUnicode_CheckExact(ps)) return -2;
    Py_ssize_t plen = PyBytes_GET_SIZE(pb), blen = PyBytes_GET_SIZE(body);
    PyObject *props_b;
    if (PyBytes_GET_SIZE(batch_props_b)) {  /* the batch's properties after a \x02 */
        PyObject *tail = plen && PyBytes_AS_STRING(pb)[plen - 1] != 2 ? after_sep : batch_props_b;
        Py_ssize_t tlen = PyBytes_GET_SIZE(tail);
        props_b = PyBytes_FromStringAndSize(NULL, plen + tlen);
        if (props_b == NULL) return -1;
        memcpy(PyBytes_AS_STRING(props_b), PyBytes_AS_STRING(pb), (size_t)plen);
        memcpy(PyBytes_AS_STRING(props_b) + plen, PyBytes_AS_STRING(tail), (size_t)tlen);
    } else {
        props_b = Py_NewRef(pb);
    }
    if (PyBytes_GET_SIZE(props_b) > MAX_PROPERTIES || blen > max_body) {
        int code = PyBytes_GET_SIZE(props_b) > MAX_PROPERTIES ? 1 : 2;
        Py_DECREF(props_b);
        return code;
    }
    long long size = (long long)fixed + blen + PyBytes_GET_SIZE(props_b);
    PyObject *props = parse_properties(ps);
    if (props == NULL || (batch_props != Py_None && PyDict_Update(props, batch_props) < 0)) {
        Py_XDECREF(props);
        Py_DECREF(props_b);
        return -1;
    }
    PyObject *tags = PyDict_GetItemWithError(props, tags_key);  /* borrowed */
    long long code = 0;
    if (tags == NULL && PyErr_Occurred()) goto fail;
    if (tags != NULL) {
        int truth = PyObject_IsTrue(tags);
        if (truth < 0) goto fail;
        if (truth) {
            if (!PyUnicode_Check(tags)) {  /* a batch properties dict of other values: the pure function */
                Py_DECREF(props);
                Py_DECREF(props_b);
                return -2;
            }
            code = (int32_t)java_hash(0, tags);
        }
    }
    *record = Py_BuildValue("(OOOL)", flag, body, props_b, size);
    *parsed = *record ? Py_BuildValue("(LLLO)", total, size, code, props) : NULL;
    Py_DECREF(props);
    Py_DECREF(props_b);
    if (*parsed == NULL) {
        Py_CLEAR(*record);
        return -1;
    }
    *size_out = size;
    return 0;
fail:
    Py_DECREF(props);
    Py_DECREF(props_b);
    return -1;
}

static PyObject *batch_layout(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "batch_layout() takes 5 arguments");
        return NULL;
    }
    PyObject *items = args[0], *batch_props_b = args[1], *batch_props = args[2];
    if (!PyList_CheckExact(items) || !PyBytes_CheckExact(batch_props_b)
            || (batch_props != Py_None && !PyDict_CheckExact(batch_props))
            || !PyLong_CheckExact(args[3]) || !PyLong_CheckExact(args[4]))
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t fixed = PyLong_AsSsize_t(args[3]), max_body = PyLong_AsSsize_t(args[4]);
    if ((fixed == -1 || max_body == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (fixed < 0 || fixed > INT32_MAX) Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t n = PyList_GET_SIZE(items);
    PyObject *after_sep = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(batch_props_b) + 1);
    PyObject *records = PyList_New(n), *parsed = PyList_New(n), *result = NULL;
    if (after_sep == NULL || records == NULL || parsed == NULL) goto done;
    PyBytes_AS_STRING(after_sep)[0] = 2;
    memcpy(PyBytes_AS_STRING(after_sep) + 1, PyBytes_AS_STRING(batch_props_b), (size_t)PyBytes_GET_SIZE(batch_props_b));
    long long total = 0;
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(items); i++) {
        PyObject *record = NULL, *one = NULL;
        long long size = 0;
        PyObject *item = Py_NewRef(PyList_GET_ITEM(items, i));
        int rc = layout_one(item, after_sep, batch_props_b, batch_props, fixed, max_body, total, &record, &one,
                            &size);
        Py_DECREF(item);
        if (rc == -1) goto done;
        if (rc == -2) {
            result = Py_NewRef(Py_NotImplemented);
            goto done;
        }
        if (rc > 0) {
            result = PyLong_FromLong(rc);
            goto done;
        }
        PyList_SET_ITEM(records, i, record);
        PyList_SET_ITEM(parsed, i, one);
        total += size;
    }
    if (PyList_GET_SIZE(items) != n) {  /* the list changed under a callback: the pure function */
        result = Py_NewRef(Py_NotImplemented);
        goto done;
    }
    result = Py_BuildValue("(OOL)", records, parsed, total);
done:
    Py_XDECREF(after_sep);
    Py_XDECREF(records);
    Py_XDECREF(parsed);
    return result;
}

/* ------------------------------------------------------------------ index */

/* Java String.hashCode() over the UTF-16 units of ``s``, continued from ``h``. */
static uint32_t java_hash(uint32_t h, PyObject *s) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 0xFFFF) {  /* a surrogate pair */
            c -= 0x10000;
            h = h * 31u + (0xD800u + (c >> 10));
            c = 0xDC00u + (c & 0x3FFu);
        }
        h = h * 31u + c;
    }
    return h;
}

static PyObject *index_key_hashes(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "index_key_hashes(topic: str, keys: Sequence[str])");
        return NULL;
    }
    uint32_t prefix = java_hash(0, args[0]) * 31u + '#';
    PyObject *seq = PySequence_Fast(args[1], "keys must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(n);
    if (out == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "an index key must be a str");
            goto fail;
        }
        int32_t h = (int32_t)java_hash(prefix, k);
        long v = h == INT32_MIN ? 0 : (h < 0 ? -(long)h : (long)h);
        PyObject *o = PyLong_FromLong(v);
        if (o == NULL) goto fail;
        PyList_SET_ITEM(out, i, o);
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(seq);
    return NULL;
}

/* (key_hash, phy) of an index entry as a new tuple that holds both (a list could lose them to an int
 * subclass's __mod__): the pure loop's unpacking, TypeError/ValueError as Python's. */
static PyObject *entry_pair(PyObject *e) {
    if (!PyTuple_Check(e) && !PyList_Check(e)) {
        PyErr_SetString(PyExc_TypeError, "an index entry must be a (key_hash, phy_offset) pair");
        return NULL;
    }
    PyObject *t = PySequence_Tuple(e);
    if (t != NULL && PyTuple_GET_SIZE(t) != 2) {
        PyErr_Format(PyExc_ValueError, "expected 2 values to unpack, got %zd", PyTuple_GET_SIZE(t));
        Py_CLEAR(t);
    }
    return t;
}

static PyObject *index_add_entries(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    long long slots, count, diff;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "index_add_entries() takes 5 arguments");
        return NULL;
    }
    if (I64(args[1], &slots) < 0 || I64(args[2], &count) < 0 || I64(args[4], &diff) < 0) return NULL;
    if (slots <= 0) {
        PyErr_SetString(slots ? PyExc_ValueError : PyExc_ZeroDivisionError, "hash_slot_num must be positive");
        return NULL;
    }
    if (diff < INT32_MIN || diff > INT32_MAX) {
        PyErr_SetString(struct_error, "argument out of range");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {  /* TypeError, as Struct.pack_into */
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "argument must be read-write bytes-like object");
        return NULL;
    }
    PyObject *seq = PySequence_Tuple(args[3]);
    if (seq == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    unsigned char *mm = view.buf;
    long long len = view.len, added = 0;
    /* items start after the header and the slots; a huge slot count is past any buffer */
    long long items = slots > (len / 4) ? len + 1 : INDEX_HEADER + slots * 4;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *result = NULL, *pair = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XSETREF(pair, entry_pair(PyTuple_GET_ITEM(seq, i)));
        if (pair == NULL) goto done;
        PyObject *hobj = PyTuple_GET_ITEM(pair, 0), *pobj = PyTuple_GET_ITEM(pair, 1);
        long long h, phy;
        if (!PyLong_Check(hobj)) {
            PyErr_SetString(PyExc_TypeError, "key_hash must be an int");
            goto done;
        }
        /* key_hash % slots (Python's sign), then the slot read: a hash beyond int64 fails its pack later */
        PyObject *m = PyNumber_Remainder(hobj, args[1]);
        if (m == NULL) goto done;
        long long slot = PyLong_AsLongLong(m);
        Py_DECREF(m);
        if (slot == -1 && PyErr_Occurred()) goto done;
        long long abs_slot = INDEX_HEADER + slot * 4;
        if (abs_slot + 4 > len) {
            PyErr_SetString(struct_error, "unpack_from requires a bigger buffer");
            goto done;
        }
        long long slot_value = be_i32(mm + abs_slot);
        if (slot_value <= 0 || slot_value > count) slot_value = 0;
        if (I32(hobj, &h) < 0 || I64(pobj, &phy) < 0) goto done;
        long long at = count > (len - items) / INDEX_ITEM ? len + 1 : items + count * INDEX_ITEM;
        if (count < 0 || at < 0 || at + INDEX_ITEM > len) {
            PyErr_SetString(struct_error, "pack_into requires a bigger buffer");
            goto done;
        }
        if (count > INT32_MAX) {  /* the slot's value */
            PyErr_SetString(struct_error, "argument out of range");
            goto done;
        }
        put32(mm + at, (uint32_t)h);
        put64(mm + at + 4, (uint64_t)phy);
        put32(mm + at + 12, (uint32_t)diff);
        put32(mm + at + 16, (uint32_t)slot_value);
        put32(mm + abs_slot, (uint32_t)count);
        if (slot_value == 0) added++;
        count++;
    }
    result = Py_BuildValue("(LL)", count, added);
done:
    Py_XDECREF(pair);
    Py_DECREF(seq);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ consume queue */

static PyObject *consume_queue_units(PyObject *Py_UNUSED(self), PyObject *arg) {
    PyObject *seq = PySequence_Tuple(arg);  /* a copy: a unit's __getitem__ cannot shorten it */
    if (seq == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *out = n > PY_SSIZE_T_MAX / 20 ? PyErr_NoMemory() : PyBytes_FromStringAndSize(NULL, n * 20);
    if (out == NULL) goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++, p += 20) {
        PyObject *u = PyTuple_GET_ITEM(seq, i);
        long long phy, size, tags;
        PyObject *f[3];
        for (int j = 0; j < 3; j++) {
            f[j] = PySequence_GetItem(u, j);  /* u[j]: IndexError/TypeError as the pure path */
            if (f[j] == NULL) {
                while (j--) Py_DECREF(f[j]);
                Py_CLEAR(out);
                goto done;
            }
        }
        int bad = I64(f[0], &phy) < 0 || I32(f[1], &size) < 0 || I64(f[2], &tags) < 0;
        Py_DECREF(f[0]);
        Py_DECREF(f[1]);
        Py_DECREF(f[2]);
        if (bad) {
            Py_CLEAR(out);
            goto done;
        }
        put64(p, (uint64_t)phy);
        put32(p + 8, (uint32_t)size);
        put64(p + 12, (uint64_t)tags);
    }
done:
    Py_DECREF(seq);
    return out;
}

/* ------------------------------------------------------------------ commit log pages */

/* Not a stand-in for a pure function: the one call here that runs without the GIL. It changes
 * no byte of the file (MADV_POPULATE_WRITE faults the pages in writable "as if written, without
 * the write"), so the pure path simply does not call it (rmqpy/store/prefault.py). The buffer
 * export held across the call keeps the mapping alive: a close() meanwhile raises BufferError
 * instead of unmapping under madvise. */
static PyObject *populate_write(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "populate_write(buf, offset, length) takes 3 arguments");
        return NULL;
    }
    Py_ssize_t off = PyLong_AsSsize_t(args[1]);
    if (off == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t len = PyLong_AsSsize_t(args[2]);
    if (len == -1 && PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) return NULL;
    PyObject *result = NULL;
    if (off < 0 || len < 0 || off > view.len) {
        PyErr_SetString(PyExc_ValueError, "populate_write: offset or length out of range");
        goto done;
    }
    if (len > view.len - off) len = view.len - off;
#ifdef __linux__
    {
        uintptr_t mask = (uintptr_t)sysconf(_SC_PAGESIZE) - 1;
        uintptr_t base = (uintptr_t)view.buf;
        uintptr_t start = (base + (uintptr_t)off) & ~mask;
        uintptr_t end = base + (uintptr_t)off + (uintptr_t)len;
        if (start < base) start += mask + 1;  /* a buffer not on a page boundary: not the page before it */
        size_t n = end > start ? (size_t)(end - start) : 0;
        int rc = 0, err = 0;
        if (len > 0 && n > 0) {
            Py_BEGIN_ALLOW_THREADS
            rc = madvise((void *)start, n, MADV_POPULATE_WRITE);
            err = errno;
            Py_END_ALLOW_THREADS
        }
        if (rc != 0) {
            errno = err;
            PyErr_SetFromErrno(PyExc_OSError);
            goto done;
        }
        result = PyLong_FromSsize_t(len);
    }
#else
    errno = ENOSYS;
    PyErr_SetFromErrno(PyExc_OSError);
#endif
done:
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"encode_batch_records", (PyCFunction)(void (*)(void))encode_batch_records, METH_FASTCALL,
     "encode_batch_records(records, total, topic_bytes, queue_id, sys_flag, born_timestamp, born_host,\n"
     "                     store_timestamp, store_host, reconsume_times, queue_offset, physical_offset) -> bytes\n\n"
     "rmqpy.protocol.message._py_encode_batch_records for IPv4 hosts (8 bytes each; ValueError otherwise):\n"
     "every record checked before the bytes are made, the same bytes and the same exception types."},
    {"decode_batch_items", decode_batch_items, METH_O,
     "decode_batch_items(body: bytes) -> list[tuple[int, bytes, bytes, str]]\n\n"
     "rmqpy.protocol.message._py_decode_batch_items: a SEND_BATCH_MESSAGE body's items; ValueError\n"
     "(UnicodeDecodeError for properties that are not UTF-8) on malformed input, at the same item."},
    {"string_to_properties", string_to_properties, METH_O,
     "string_to_properties(s: str | bytes | None) -> dict[str, str]\n\n"
     "rmqpy.protocol.message._py_string_to_properties: name\\x01value pairs split at \\x02; pairs with\n"
     "an empty name or value skipped; the last of a repeated name wins; bytes decoded with 'replace'."},
    {"batch_layout", (PyCFunction)(void (*)(void))batch_layout, METH_FASTCALL,
     "batch_layout(items, batch_props_b, batch_props, fixed, max_body)\n"
     "    -> (records, parsed, total) | 1 | 2 | NotImplemented\n\n"
     "rmqpy.store.batch_layout._py_batch_layout for items of exact types (tuples of an int, bytes,\n"
     "bytes and str, as decode_batch_items gives them, a dict or None of str values); NotImplemented\n"
     "for anything else, which the caller hands to the pure function."},
    {"index_key_hashes", (PyCFunction)(void (*)(void))index_key_hashes, METH_FASTCALL,
     "index_key_hashes(topic: str, keys: Sequence[str]) -> list[int]\n\n"
     "[rmqpy.store.index.index_key_hash(topic + '#' + k) for k in keys]: abs(String.hashCode()), 0 for\n"
     "Integer.MIN_VALUE."},
    {"index_add_entries", (PyCFunction)(void (*)(void))index_add_entries, METH_FASTCALL,
     "index_add_entries(buf, hash_slot_num, index_count, entries, diff) -> (index_count, new_slots)\n\n"
     "The loop of rmqpy.store.index.IndexFile.add_key_hashes for a file past its first entry: each\n"
     "(key_hash, phy_offset) written as an entry chained to its slot's last one, and the slot pointed\n"
     "at it; the new count and how many slots were empty. struct.error where Struct.pack_into would\n"
     "raise (a field out of range, past the buffer), the entries before it written, as the pure loop."},
    {"consume_queue_units", consume_queue_units, METH_O,
     "consume_queue_units(units) -> bytes\n\n"
     "b''.join(UNIT.pack(u[0], u[1], u[2]) for u in units): the 20-byte units (phy, size, tags code)\n"
     "of rmqpy.store.consume_queue.ConsumeQueue.put_batch; struct.error for a field out of range."},
    {"populate_write", (PyCFunction)(void (*)(void))populate_write, METH_FASTCALL,
     "populate_write(buf, offset, length) -> int\n\n"
     "madvise(MADV_POPULATE_WRITE) of the pages of a writable mapping (an mmap) that hold\n"
     "buf[offset:offset + length], with the GIL released: the page faults a first write there\n"
     "would take, taken now, bytes unchanged. The length covered (clipped to the buffer); OSError\n"
     "where the kernel refuses (EINVAL before Linux 5.14, ENOSYS off Linux)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rmqpy._speedups",
    "The batch put path's per-message loops in C; rmqpy.speedups says whether they run.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *st = PyImport_ImportModule("struct");
    struct_error = st ? PyObject_GetAttrString(st, "error") : NULL;
    Py_XDECREF(st);
    PyObject *z = struct_error ? PyImport_ImportModule("zlib") : NULL;
    zlib_crc32 = z ? PyObject_GetAttrString(z, "crc32") : NULL;
    Py_XDECREF(z);
    tags_key = zlib_crc32 ? PyUnicode_InternFromString("TAGS") : NULL;
    if (tags_key == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
