/* The ONNX reader's hot loops in C (optional; nneditor/platform/compiled.py loads it).
 *
 * Opening a 50k-node transformer export spent most of its time in three Python loops over
 * tens of thousands of protobuf records: sorting a graph's top-level fields (graph_build's
 * _split), reading the headers of the raw-data initializers (raw_headers.py) and turning
 * every NodeProto into a node object (objects.proto_node, whose upb field reads cost more
 * than the protobuf parse itself). No protobuf library reads a message's small fields
 * without copying its payloads or building a wrapper per message, so these are written here
 * against the wire format. Each function has a pure-Python twin that stays the reference:
 *
 * - split(): returns None whenever the wire is not plainly well-formed (a lying length, a
 *   group, a varint over 9 bytes, field number 0); the caller then runs the Python walk,
 *   which writes the error sentence or reads the odd-but-valid encoding.
 * - raw_headers(): accepts exactly the tensors raw_headers._parse accepts (same window, same
 *   field order, same checks), so the two give equal headers (tests compare them).
 * - nodes(): reads name, op_type, domain, input and output as upb does (the last value of a
 *   singular field wins; a field of another wire type is unknown, not an error; invalid UTF-8
 *   is replaced as objects.as_text replaces it) and writes them straight into the __slots__
 *   of the node class handed in. Nodes whose bytes it cannot walk make it return None.
 * - candidates(): graph_build's byte search for Constant and subgraph-holding nodes, without
 *   copying the runs of node bytes it searches.
 * - raw_refs(): tensors.raw_header_ref for every header raw_headers() read, its loader and
 *   ref written straight into their classes' __slots__ (their __init__ calls cost 1 us a
 *   tensor, most of what a 25k-tensor catalog took once the headers were read).
 *
 * Nothing here copies a payload or reads past the end of the buffer it was given.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#ifndef Py_T_OBJECT_EX
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif

#define WT_VARINT 0
#define WT_I64 1
#define WT_LEN 2
#define WT_I32 5

#define BIG_FIELD (64 * 1024) /* wire_index.BIG_FIELD */
#define WINDOW 192            /* raw_headers.WINDOW */
#define CHUNK 512             /* raw_headers._CHUNK */
#define MAX_DIMS 8            /* raw_headers._MAX_DIMS */

/* A varint of at most 9 bytes inside [*pos, end); 0 when cut off or longer. */
static inline int
varint9(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, uint64_t *out)
{
    uint64_t v = 0;
    Py_ssize_t i = *pos;
    for (int shift = 0; shift < 63; shift += 7) {
        if (i >= end)
            return 0;
        unsigned char b = p[i++];
        v |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *pos = i;
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* One field at *pos: 1 and its parts; 0 when the walk must be left to Python. */
static inline int
field(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, uint64_t *fno, int *wt,
      Py_ssize_t *payload, Py_ssize_t *stop)
{
    uint64_t tag, n;
    Py_ssize_t i = *pos;
    if (!varint9(p, &i, end, &tag))
        return 0;
    *fno = tag >> 3;
    *wt = (int)(tag & 7);
    if (*fno == 0)
        return 0;
    switch (*wt) {
    case WT_LEN:
        if (!varint9(p, &i, end, &n) || n > (uint64_t)(end - i))
            return 0;
        *payload = i;
        *stop = i + (Py_ssize_t)n;
        break;
    case WT_VARINT:
        if (!varint9(p, &i, end, &n))
            return 0;
        *payload = *stop = i;
        break;
    case WT_I32:
    case WT_I64: {
        Py_ssize_t size = *wt == WT_I32 ? 4 : 8;
        if (end - i < size)
            return 0;
        *payload = i;
        *stop = i + size;
        break;
    }
    default:
        return 0;
    }
    *pos = *stop;
    return 1;
}

static int
append_pair(PyObject *list, Py_ssize_t a, Py_ssize_t b)
{
    PyObject *t = Py_BuildValue("(nn)", a, b);
    if (t == NULL)
        return -1;
    int rc = PyList_Append(list, t);
    Py_DECREF(t);
    return rc;
}

static int
append_index(PyObject *list, Py_ssize_t a)
{
    PyObject *v = PyLong_FromSsize_t(a);
    if (v == NULL)
        return -1;
    int rc = PyList_Append(list, v);
    Py_DECREF(v);
    return rc;
}

static int
call_passed(PyObject *passed, Py_ssize_t offset)
{
    PyObject *v = PyLong_FromSsize_t(offset);
    if (v == NULL)
        return -1;
    PyObject *r = PyObject_CallOneArg(passed, v);
    Py_DECREF(v);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int
get_bytes(PyObject *obj, Py_buffer *view)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    return 0;
}

/* split(buf, start, end, node_field, graph, threshold, passed)
 *   -> (keep, nodes, tags, runs, big, inits, sparse) | None
 * graph_build.GraphBuilder._split's loop (same lists, same merging of adjacent ranges). */
static PyObject *
split(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *passed;
    Py_ssize_t start, end, node_field, threshold;
    int graph;
    if (!PyArg_ParseTuple(args, "OnnnpnO", &bufobj, &start, &end, &node_field, &graph,
                          &threshold, &passed))
        return NULL;
    Py_buffer view;
    if (get_bytes(bufobj, &view) < 0)
        return NULL;
    PyObject *result = NULL;
    PyObject *lists[7] = {NULL};
    for (int k = 0; k < 7; k++)
        if ((lists[k] = PyList_New(0)) == NULL)
            goto done;
    PyObject *keep = lists[0], *nodes = lists[1], *tags = lists[2], *runs = lists[3];
    PyObject *big = lists[4], *inits = lists[5], *sparse = lists[6];
    if (start < 0 || end > view.len || start > end) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    const unsigned char *p = view.buf;
    Py_ssize_t pos = start, run_start = -1, run_end = -1, node_start = -1, node_end = -1;
    Py_ssize_t count = 0;
    int use_passed = passed != Py_None;
    while (pos < end) {
        Py_ssize_t tag_pos = pos, payload, stop;
        uint64_t fno;
        int wt;
        if (!field(p, &pos, end, &fno, &wt, &payload, &stop)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (wt == WT_LEN) {
            Py_ssize_t n = stop - payload;
            if (use_passed && n >= BIG_FIELD && call_passed(passed, stop) < 0)
                goto done;
            if (fno == (uint64_t)node_field) {
                if (append_index(tags, tag_pos) < 0 || append_pair(nodes, payload, n) < 0)
                    goto done;
                count++;
                if (n > threshold) {
                    if (append_index(big, count - 1) < 0)
                        goto done;
                    continue;
                }
                if (tag_pos == node_end)
                    node_end = stop;
                else {
                    if (node_end >= 0 && append_pair(runs, node_start, node_end) < 0)
                        goto done;
                    node_start = tag_pos;
                    node_end = stop;
                }
            }
            else if (graph && fno == 5) {
                if (append_pair(inits, payload, n) < 0)
                    goto done;
                continue;
            }
            else if (graph && fno == 15) {
                if (append_pair(sparse, payload, n) < 0)
                    goto done;
                continue;
            }
        }
        Py_ssize_t field_end = wt == WT_VARINT ? payload : stop;
        if (tag_pos == run_end)
            run_end = field_end;
        else {
            if (run_end >= 0 && append_pair(keep, run_start, run_end) < 0)
                goto done;
            run_start = tag_pos;
            run_end = field_end;
        }
    }
    if (run_end >= 0 && append_pair(keep, run_start, run_end) < 0)
        goto done;
    if (node_end >= 0 && append_pair(runs, node_start, node_end) < 0)
        goto done;
    result = PyTuple_Pack(7, keep, nodes, tags, runs, big, inits, sparse);
done:
    for (int k = 0; k < 7; k++)
        Py_XDECREF(lists[k]);
    PyBuffer_Release(&view);
    return result;
}

/* *out = a * b; 0 when that overflows 64 bits (portable: MSVC has no __builtin_mul_overflow). */
static inline int
mul_fits(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

/* One tensor's header, read as raw_headers._parse reads it; 1 when accepted. */
static int
raw_header(const unsigned char *p, Py_ssize_t pos, Py_ssize_t length, int64_t *dims, int *ndims,
           int64_t *dtype, Py_ssize_t *name_at, Py_ssize_t *name_len, Py_ssize_t *raw_at)
{
    Py_ssize_t span = length < WINDOW ? length : WINDOW;
    Py_ssize_t c = 0;
    int stage = 0; /* 0 dims, 1 data_type seen, 2 name seen */
    *ndims = 0;
    for (int step = 0; step < MAX_DIMS + 3; step++) {
        if (c >= span)
            return 0;
        unsigned char tag = p[pos + c];
        Py_ssize_t i = pos + c + 1;
        uint64_t value;
        if (!varint9(p, &i, pos + span, &value))
            return 0;
        Py_ssize_t after = i - pos;
        if (tag == 0x08 && stage == 0 && *ndims < MAX_DIMS) {
            dims[(*ndims)++] = (int64_t)value;
            c = after;
        }
        else if (tag == 0x10 && stage == 0) {
            *dtype = (int64_t)value;
            stage = 1;
            c = after;
        }
        else if (tag == 0x42 && stage == 1 && value < (uint64_t)(span - after)) {
            *name_at = after;
            *name_len = (Py_ssize_t)value;
            stage = 2;
            c = after + (Py_ssize_t)value;
        }
        else if (tag == 0x4A && stage >= 1 && value == (uint64_t)(length - after)) {
            *raw_at = after;
            return 1;
        }
        else
            return 0;
    }
    return 0;
}

/* raw_headers(buf, entries, types, header_cls, passed) -> [header_cls(...) | None]
 * types: {ONNX data type: (dtype name, item size in bytes)} for the whole-byte types. */
static PyObject *
raw_headers(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *entries, *types, *cls, *passed;
    if (!PyArg_ParseTuple(args, "OO!O!O!O", &bufobj, &PyList_Type, &entries, &PyDict_Type, &types,
                          &PyType_Type, &cls, &passed))
        return NULL;
    Py_buffer view;
    if (get_bytes(bufobj, &view) < 0)
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t rows = PyList_GET_SIZE(entries);
    PyTypeObject *tp = (PyTypeObject *)cls;
    PyObject *out = PyList_New(rows);
    if (out == NULL)
        goto fail;
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *entry = PyList_GET_ITEM(entries, r);
        Py_ssize_t pos, length;
        if (!PyArg_ParseTuple(entry, "nn", &pos, &length))
            goto fail;
        PyObject *header = Py_None;
        int64_t dims[MAX_DIMS], dtype = 0;
        int ndims;
        Py_ssize_t name_at = 0, name_len = 0, raw_at = 0;
        if (pos >= 0 && length >= 0 && pos <= view.len - length &&
            raw_header(p, pos, length, dims, &ndims, &dtype, &name_at, &name_len, &raw_at)) {
            header = NULL;
            PyObject *key = PyLong_FromLongLong(dtype);
            if (key == NULL)
                goto fail;
            PyObject *spec = PyDict_GetItemWithError(types, key); /* borrowed */
            Py_DECREF(key);
            if (spec == NULL && PyErr_Occurred())
                goto fail;
            uint64_t count = 1;
            int fits = spec != NULL && PyTuple_Check(spec) && PyTuple_GET_SIZE(spec) == 2;
            for (int d = 0; fits && d < ndims; d++) {
                if (dims[d] == 0 || !mul_fits(count, (uint64_t)dims[d], &count))
                    fits = 0;
            }
            Py_ssize_t nbytes = length - raw_at;
            if (fits) {
                long itemsize = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
                if (itemsize == -1 && PyErr_Occurred())
                    goto fail;
                uint64_t total;
                fits = mul_fits(count, (uint64_t)itemsize, &total) && total == (uint64_t)nbytes;
            }
            if (fits) {
                PyObject *name = PyUnicode_DecodeUTF8((const char *)p + pos + name_at, name_len,
                                                      "replace");
                PyObject *shape = PyTuple_New(ndims);
                PyObject *offset = PyLong_FromSsize_t(pos + raw_at);
                PyObject *size = PyLong_FromSsize_t(nbytes);
                header = tp->tp_alloc(tp, 5);
                int ok = name && shape && offset && size && header;
                for (int d = 0; ok && d < ndims; d++) {
                    PyObject *v = PyLong_FromLongLong(dims[d]);
                    if (v == NULL)
                        ok = 0;
                    else
                        PyTuple_SET_ITEM(shape, d, v);
                }
                if (!ok) {
                    Py_XDECREF(name);
                    Py_XDECREF(shape);
                    Py_XDECREF(offset);
                    Py_XDECREF(size);
                    Py_XDECREF(header);
                    goto fail;
                }
                PyObject *dtype_name = PyTuple_GET_ITEM(spec, 0);
                PyTuple_SET_ITEM(header, 0, name);
                PyTuple_SET_ITEM(header, 1, Py_NewRef(dtype_name));
                PyTuple_SET_ITEM(header, 2, shape);
                PyTuple_SET_ITEM(header, 3, offset);
                PyTuple_SET_ITEM(header, 4, size);
            }
            else
                header = Py_None;
        }
        if (header == Py_None)
            Py_INCREF(header);
        PyList_SET_ITEM(out, r, header);
        if (passed != Py_None && (r % CHUNK == CHUNK - 1 || r == rows - 1) &&
            call_passed(passed, pos + length) < 0)
            goto fail;
    }
    PyBuffer_Release(&view);
    return out;
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* The node class's slots, in this order (objects.OnnxNode). */
static const char *SLOTS[] = {"index", "name", "op_type", "domain", "inputs", "outputs",
                              "subgraphs", "_attrs", "_attr_source", "info", "_proto", "_decode"};
enum { S_INDEX, S_NAME, S_OP, S_DOMAIN, S_IN, S_OUT, S_SUB, S_ATTRS, S_SRC, S_INFO, S_PROTO,
       S_DECODE, N_SLOTS };

static int
slot_offsets(PyObject *cls, const char **slots, int count, Py_ssize_t *offsets)
{
    for (int k = 0; k < count; k++) {
        PyObject *d = PyObject_GetAttrString(cls, slots[k]);
        if (d == NULL)
            return -1;
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == Py_T_OBJECT_EX;
        if (ok)
            offsets[k] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%R.%s is not an object slot", cls, slots[k]);
            return -1;
        }
    }
    return 0;
}

static inline void
set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value) /* steals value */
{
    PyObject **slot = (PyObject **)((char *)obj + offset);
    Py_XSETREF(*slot, value);
}

/* A str shared by equal values (op types and domains repeat across a graph). */
static PyObject *
shared_text(PyObject *cache, const unsigned char *s, Py_ssize_t n)
{
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "replace");
    if (text == NULL)
        return NULL;
    PyObject *found = PyDict_SetDefault(cache, text, text); /* borrowed */
    if (found == NULL) {
        Py_DECREF(text);
        return NULL;
    }
    Py_INCREF(found);
    Py_DECREF(text);
    return found;
}

static PyObject *
names(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, uint64_t which, Py_ssize_t count)
{
    PyObject *out = PyTuple_New(count);
    if (out == NULL)
        return NULL;
    Py_ssize_t k = 0;
    while (pos < end && k < count) {
        Py_ssize_t payload, stop;
        uint64_t fno;
        int wt;
        if (!field(p, &pos, end, &fno, &wt, &payload, &stop))
            break; /* walked once before: cannot happen */
        if (wt == WT_LEN && fno == which) {
            PyObject *s = PyUnicode_DecodeUTF8((const char *)p + payload, stop - payload,
                                               "replace");
            if (s == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            PyTuple_SET_ITEM(out, k++, s);
        }
    }
    return out;
}

/* nodes(buf, entries, left_out, cls, decode) -> [node | None] | None
 * One cls instance per entry (payload offset, length) of a NodeProto whose index is not in
 * left_out; `_proto` holds its position among those nodes (the graph's parsed NodeProtos),
 * `_decode` the object handed in. None in a left-out place; None overall when a node's bytes
 * cannot be walked. */
static PyObject *
nodes(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *entries, *left_out, *cls, *decode;
    if (!PyArg_ParseTuple(args, "OO!OO!O", &bufobj, &PyList_Type, &entries, &left_out,
                          &PyType_Type, &cls, &decode))
        return NULL;
    if (!PyAnySet_Check(left_out)) {
        PyErr_SetString(PyExc_TypeError, "left_out must be a set");
        return NULL;
    }
    Py_ssize_t offsets[N_SLOTS];
    if (slot_offsets(cls, SLOTS, N_SLOTS, offsets) < 0)
        return NULL;
    Py_buffer view;
    if (get_bytes(bufobj, &view) < 0)
        return NULL;
    const unsigned char *p = view.buf;
    PyTypeObject *tp = (PyTypeObject *)cls;
    Py_ssize_t rows = PyList_GET_SIZE(entries);
    int any_left_out = PySet_GET_SIZE(left_out) > 0;
    PyObject *cache = PyDict_New();
    PyObject *out = PyList_New(rows);
    if (cache == NULL || out == NULL)
        goto fail;
    Py_ssize_t parsed = 0;
    for (Py_ssize_t j = 0; j < rows; j++) {
        PyObject *index = PyLong_FromSsize_t(j);
        if (index == NULL)
            goto fail;
        if (any_left_out) {
            int skip = PySet_Contains(left_out, index);
            if (skip < 0) {
                Py_DECREF(index);
                goto fail;
            }
            if (skip) {
                Py_DECREF(index);
                PyList_SET_ITEM(out, j, Py_NewRef(Py_None));
                continue;
            }
        }
        Py_ssize_t pos, length;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(entries, j), "nn", &pos, &length)) {
            Py_DECREF(index);
            goto fail;
        }
        if (pos < 0 || length < 0 || pos > view.len - length) {
            Py_DECREF(index);
            goto unreadable;
        }
        Py_ssize_t end = pos + length, at = pos, n_in = 0, n_out = 0;
        Py_ssize_t name_at = 0, name_len = 0, op_at = 0, op_len = 0, dom_at = 0, dom_len = 0;
        while (at < end) {
            Py_ssize_t payload, stop;
            uint64_t fno;
            int wt;
            if (!field(p, &at, end, &fno, &wt, &payload, &stop)) {
                Py_DECREF(index);
                goto unreadable;
            }
            if (wt != WT_LEN)
                continue;
            switch (fno) {
            case 1: n_in++; break;
            case 2: n_out++; break;
            case 3: name_at = payload; name_len = stop - payload; break;
            case 4: op_at = payload; op_len = stop - payload; break;
            case 7: dom_at = payload; dom_len = stop - payload; break;
            default: break;
            }
        }
        PyObject *node = tp->tp_alloc(tp, 0);
        if (node == NULL) {
            Py_DECREF(index);
            goto fail;
        }
        PyList_SET_ITEM(out, j, node);
        set_slot(node, offsets[S_INDEX], index);
        PyObject *v;
        if ((v = PyUnicode_DecodeUTF8((const char *)p + name_at, name_len, "replace")) == NULL)
            goto fail;
        set_slot(node, offsets[S_NAME], v);
        if ((v = shared_text(cache, p + op_at, op_len)) == NULL)
            goto fail;
        set_slot(node, offsets[S_OP], v);
        if ((v = shared_text(cache, p + dom_at, dom_len)) == NULL)
            goto fail;
        set_slot(node, offsets[S_DOMAIN], v);
        if ((v = names(p, pos, end, 1, n_in)) == NULL)
            goto fail;
        set_slot(node, offsets[S_IN], v);
        if ((v = names(p, pos, end, 2, n_out)) == NULL)
            goto fail;
        set_slot(node, offsets[S_OUT], v);
        if ((v = PyDict_New()) == NULL)
            goto fail;
        set_slot(node, offsets[S_SUB], v);
        set_slot(node, offsets[S_ATTRS], Py_NewRef(Py_None));
        set_slot(node, offsets[S_SRC], Py_NewRef(Py_None));
        set_slot(node, offsets[S_INFO], Py_NewRef(Py_None));
        if ((v = PyLong_FromSsize_t(parsed++)) == NULL)
            goto fail;
        set_slot(node, offsets[S_PROTO], v);
        set_slot(node, offsets[S_DECODE], Py_NewRef(decode));
    }
    Py_DECREF(cache);
    PyBuffer_Release(&view);
    return out;
unreadable:
    Py_DECREF(cache);
    Py_DECREF(out);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(cache);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* The first ``needle`` in [from, end), or NULL (memmem, which MSVC lacks). */
static const char *
find_bytes(const char *from, const char *end, const char *needle, size_t size)
{
    while ((size_t)(end - from) >= size) {
        const char *hit = memchr(from, needle[0], (size_t)(end - from) - size + 1);
        if (hit == NULL)
            return NULL;
        if (memcmp(hit, needle, size) == 0)
            return hit;
        from = hit + 1;
    }
    return NULL;
}

/* candidates(buf, runs, tags, patterns) -> set of node indexes
 * graph_build.GraphBuilder._candidates: the nodes whose bytes hold one of ``patterns``, found
 * in place in each run of small nodes (no copy); a hit at offset h belongs to the last
 * node whose tag offset is <= h. */
static PyObject *
candidates(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *runs, *tags, *patterns;
    if (!PyArg_ParseTuple(args, "OO!O!O!", &bufobj, &PyList_Type, &runs, &PyList_Type, &tags,
                          &PyTuple_Type, &patterns))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(tags);
    Py_ssize_t *at = PyMem_New(Py_ssize_t, count > 0 ? count : 1);
    if (at == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < count; k++) {
        at[k] = PyLong_AsSsize_t(PyList_GET_ITEM(tags, k));
        if (at[k] == -1 && PyErr_Occurred()) {
            PyMem_Free(at);
            return NULL;
        }
    }
    Py_buffer view;
    if (get_bytes(bufobj, &view) < 0) {
        PyMem_Free(at);
        return NULL;
    }
    const char *p = view.buf;
    PyObject *found = PySet_New(NULL);
    if (found == NULL)
        goto fail;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(runs); r++) {
        Py_ssize_t a, b;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(runs, r), "nn", &a, &b))
            goto fail;
        if (a < 0 || b > view.len || a > b) {
            PyErr_SetString(PyExc_ValueError, "a run lies outside the buffer");
            goto fail;
        }
        for (Py_ssize_t q = 0; q < PyTuple_GET_SIZE(patterns); q++) {
            PyObject *pat = PyTuple_GET_ITEM(patterns, q);
            if (!PyBytes_Check(pat) || PyBytes_GET_SIZE(pat) == 0) {
                PyErr_SetString(PyExc_TypeError, "patterns must be non-empty bytes");
                goto fail;
            }
            const char *needle = PyBytes_AS_STRING(pat);
            size_t size = (size_t)PyBytes_GET_SIZE(pat);
            const char *from = p + a, *end = p + b;
            const char *hit;
            while (from < end && (hit = find_bytes(from, end, needle, size)) != NULL) {
                Py_ssize_t off = hit - p, lo = 0, hi = count; /* last tag <= off */
                while (lo < hi) {
                    Py_ssize_t mid = (lo + hi) / 2;
                    if (at[mid] <= off)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                PyObject *index = PyLong_FromSsize_t(lo - 1);
                if (index == NULL || PySet_Add(found, index) < 0) {
                    Py_XDECREF(index);
                    goto fail;
                }
                Py_DECREF(index);
                from = hit + 1;
            }
        }
    }
    PyBuffer_Release(&view);
    PyMem_Free(at);
    return found;
fail:
    Py_XDECREF(found);
    PyBuffer_Release(&view);
    PyMem_Free(at);
    return NULL;
}

/* The ref class's and the loader class's slots, in these orders (model.tensor.TensorRef,
 * tensors.loaders.RawLoader). */
static const char *REF_SLOTS[] = {"name", "dtype", "shape", "nbytes", "encoding",
                                  "loader", "offset", "location", "info"};
enum { R_NAME, R_DTYPE, R_SHAPE, R_NBYTES, R_ENC, R_LOADER, R_OFFSET, R_LOC, R_INFO, N_REF };
static const char *LOADER_SLOTS[] = {"source", "offset", "dtype", "big_endian"};
enum { L_SOURCE, L_OFFSET, L_DTYPE, L_BIG, N_LOADER };

/* A new instance of tp with every slot at `offsets` set to None (so that no slot is left
 * unset if a later step fails). */
static PyObject *
new_slotted(PyTypeObject *tp, const Py_ssize_t *offsets, int count)
{
    PyObject *obj = tp->tp_alloc(tp, 0);
    if (obj == NULL)
        return NULL;
    for (int k = 0; k < count; k++)
        set_slot(obj, offsets[k], Py_NewRef(Py_None));
    return obj;
}

/* raw_refs(headers, ref_cls, loader_cls, source, in_file, graph) -> [ref | None]
 * tensors.raw_header_ref(ctx, header, {"graph": graph, "kind": "initializer"}) for each
 * header (a RawHeader tuple: name, dtype, dims, offset, nbytes); None stays None. */
static PyObject *
raw_refs(PyObject *self, PyObject *args)
{
    PyObject *headers, *ref_cls, *loader_cls, *source, *graph;
    int in_file;
    if (!PyArg_ParseTuple(args, "O!O!O!OpO", &PyList_Type, &headers, &PyType_Type, &ref_cls,
                          &PyType_Type, &loader_cls, &source, &in_file, &graph))
        return NULL;
    Py_ssize_t ref_at[N_REF], loader_at[N_LOADER];
    if (slot_offsets(ref_cls, REF_SLOTS, N_REF, ref_at) < 0 ||
        slot_offsets(loader_cls, LOADER_SLOTS, N_LOADER, loader_at) < 0)
        return NULL;
    PyTypeObject *ref_tp = (PyTypeObject *)ref_cls, *loader_tp = (PyTypeObject *)loader_cls;
    Py_ssize_t rows = PyList_GET_SIZE(headers);
    PyObject *raw = PyUnicode_InternFromString("raw");
    PyObject *graph_key = PyUnicode_InternFromString("graph");
    PyObject *kind_key = PyUnicode_InternFromString("kind");
    PyObject *kind = PyUnicode_InternFromString("initializer");
    PyObject *out = PyList_New(rows);
    if (raw == NULL || graph_key == NULL || kind_key == NULL || kind == NULL || out == NULL)
        goto fail;
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *h = PyList_GET_ITEM(headers, r);
        if (h == Py_None) {
            PyList_SET_ITEM(out, r, Py_NewRef(Py_None));
            continue;
        }
        if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 5) {
            PyErr_SetString(PyExc_TypeError, "a header must be a RawHeader or None");
            goto fail;
        }
        PyObject *name = PyTuple_GET_ITEM(h, 0), *dtype = PyTuple_GET_ITEM(h, 1);
        PyObject *dims = PyTuple_GET_ITEM(h, 2), *offset = PyTuple_GET_ITEM(h, 3);
        PyObject *nbytes = PyTuple_GET_ITEM(h, 4);
        PyObject *loader = new_slotted(loader_tp, loader_at, N_LOADER);
        if (loader == NULL)
            goto fail;
        set_slot(loader, loader_at[L_SOURCE], Py_NewRef(source));
        set_slot(loader, loader_at[L_OFFSET], Py_NewRef(offset));
        set_slot(loader, loader_at[L_DTYPE], Py_NewRef(dtype));
        set_slot(loader, loader_at[L_BIG], Py_NewRef(Py_False));
        PyObject *info = PyDict_New();
        if (info == NULL || PyDict_SetItem(info, graph_key, graph) < 0 ||
            PyDict_SetItem(info, kind_key, kind) < 0) {
            Py_XDECREF(info);
            Py_DECREF(loader);
            goto fail;
        }
        PyObject *ref = new_slotted(ref_tp, ref_at, N_REF);
        if (ref == NULL) {
            Py_DECREF(info);
            Py_DECREF(loader);
            goto fail;
        }
        set_slot(ref, ref_at[R_NAME], Py_NewRef(name));
        set_slot(ref, ref_at[R_DTYPE], Py_NewRef(dtype));
        set_slot(ref, ref_at[R_SHAPE], Py_NewRef(dims));
        set_slot(ref, ref_at[R_NBYTES], Py_NewRef(nbytes));
        set_slot(ref, ref_at[R_ENC], Py_NewRef(raw));
        set_slot(ref, ref_at[R_LOADER], loader);
        set_slot(ref, ref_at[R_OFFSET], Py_NewRef(in_file ? offset : Py_None));
        set_slot(ref, ref_at[R_INFO], info);
        PyList_SET_ITEM(out, r, ref);
    }
    Py_DECREF(raw);
    Py_DECREF(graph_key);
    Py_DECREF(kind_key);
    Py_DECREF(kind);
    return out;
fail:
    Py_XDECREF(raw);
    Py_XDECREF(graph_key);
    Py_XDECREF(kind_key);
    Py_XDECREF(kind);
    Py_XDECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"split", split, METH_VARARGS, "A graph's top-level fields sorted by role, or None."},
    {"raw_headers", raw_headers, METH_VARARGS, "Raw-data initializer headers (None: not read)."},
    {"nodes", nodes, METH_VARARGS, "Node objects from NodeProto bytes, or None."},
    {"candidates", candidates, METH_VARARGS, "Nodes whose bytes hold one of the patterns."},
    {"raw_refs", raw_refs, METH_VARARGS, "Tensor refs for raw headers (None stays None)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cwire", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__cwire(void)
{
    return PyModule_Create(&module);
}
