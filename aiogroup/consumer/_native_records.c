/*
 * aiogroup.consumer._native_records: the records of one v2 record batch (KIP-98 format,
 * magic 2) decoded straight into ConsumerRecord values.
 *
 * An optional accelerator of aiogroup/consumer/records.py, which frames the batches, checks
 * their CRC, skips control batches and aborted transactions and decompresses; this module only
 * turns a batch's (uncompressed) records section into records. Without it (no C compiler when
 * installing, or AIOGROUP_PURE_PYTHON=1), records.py reads batches with aiokafka's reader and
 * gives the same records.
 *
 * Each record is one allocation of the record type (a tuple subclass of 11 fields) plus its
 * offset and timestamp integers and its key and value bytes: no intermediate record object,
 * no attribute reads back. Every length and varint is checked against the bytes that remain;
 * malformed input raises ValueError (records.py reports it as CorruptRecordError with the
 * partition and offset), never reads outside the buffer.
 *
 * Record => Length:varint Attributes:int8 TimestampDelta:varlong OffsetDelta:varint
 *           KeyLength:varint Key ValueLength:varint Value HeaderCount:varint
 *           [HeaderKeyLength:varint HeaderKey HeaderValueLength:varint HeaderValue]
 * Varints are zigzag encoded; a varint takes at most 5 bytes and a varlong at most 10 (as
 * Kafka's ByteUtils refuses longer ones). A negative key or value length is a null.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define RECORD_FIELDS 11
#define LOG_APPEND_TIME 1

typedef struct {
    PyObject_HEAD
    Py_buffer view;           /* the records section: record after record */
    int has_view;
    Py_ssize_t pos;           /* where the next record starts in view */
    Py_ssize_t left;          /* records the batch header announced, not decoded yet */
    int64_t base_offset;
    int64_t first_timestamp;
    int64_t max_timestamp;
    int log_append_time;
    PyTypeObject *cls;        /* the record type, a tuple subclass of RECORD_FIELDS items */
    PyObject *topic;
    PyObject *partition;
    PyObject *ts_type;
    PyObject *no_headers;     /* the empty tuple */
} RecordReader;

typedef struct {
    int64_t offset;
    int64_t timestamp;
    const char *key;          /* NULL: a null key */
    Py_ssize_t key_len;
    const char *value;
    Py_ssize_t value_len;
    Py_ssize_t headers_at;
    int32_t header_count;
} Fields;

/* An unsigned varint of at most max_bytes bytes at *pos, below end. 0 on success. */
static int
read_uvarint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos,
             int max_bytes, uint64_t *out, const char *what)
{
    uint64_t value = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end) {
            PyErr_Format(PyExc_ValueError, "record bytes end inside its %s", what);
            return -1;
        }
        unsigned char b = buf[p++];
        value |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pos = p;
            *out = value;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "the %s varint is longer than %d bytes", what, max_bytes);
    return -1;
}

static int
read_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos,
            int32_t *out, const char *what)
{
    uint64_t raw;
    if (read_uvarint(buf, end, pos, 5, &raw, what) < 0)
        return -1;
    uint32_t u = (uint32_t)raw;
    *out = (int32_t)((u >> 1) ^ (0u - (u & 1u)));
    return 0;
}

static int
read_varlong(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos,
             int64_t *out, const char *what)
{
    uint64_t u;
    if (read_uvarint(buf, end, pos, 10, &u, what) < 0)
        return -1;
    *out = (int64_t)((u >> 1) ^ (0u - (u & 1u)));
    return 0;
}

/* A length-prefixed field (the length already read) at *pos: where it starts; NULL if null. */
static int
take_bytes(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int32_t len,
           const char **at, const char *what)
{
    if (len < 0) {
        *at = NULL;
        return 0;
    }
    if ((Py_ssize_t)len > end - *pos) {
        PyErr_Format(PyExc_ValueError, "a %s of %d bytes runs past its record", what, (int)len);
        return -1;
    }
    *at = (const char *)buf + *pos;
    *pos += len;
    return 0;
}

/* Whether a record remains; at the batch's end, checks nothing follows its last record.
   1: a record, 0: the end, -1: an error. */
static int
has_next(RecordReader *self)
{
    if (self->left > 0) {
        if (self->pos >= self->view.len) {
            PyErr_Format(PyExc_ValueError,
                         "the batch ends with %zd of its records missing", self->left);
            return -1;
        }
        return 1;
    }
    if (self->pos != self->view.len) {
        PyErr_Format(PyExc_ValueError, "%zd bytes follow the batch's last record",
                     self->view.len - self->pos);
        return -1;
    }
    return 0;
}

/* Decode the record at pos into f (checking every length) and move past it. */
static int
parse(RecordReader *self, Fields *f)
{
    const unsigned char *buf = (const unsigned char *)self->view.buf;
    Py_ssize_t p = self->pos;
    int32_t length, offset_delta, key_len, value_len, count, len;
    int64_t ts_delta;
    const char *ignored;

    if (read_varint(buf, self->view.len, &p, &length, "length") < 0)
        return -1;
    if (length < 0 || (Py_ssize_t)length > self->view.len - p) {
        PyErr_Format(PyExc_ValueError,
                     "a record of %d bytes where %zd remain", (int)length, self->view.len - p);
        return -1;
    }
    Py_ssize_t end = p + length;
    if (p >= end) {
        PyErr_SetString(PyExc_ValueError, "a record without attributes");
        return -1;
    }
    p += 1; /* attributes: none defined for records */
    if (read_varlong(buf, end, &p, &ts_delta, "timestamp delta") < 0
        || read_varint(buf, end, &p, &offset_delta, "offset delta") < 0
        || read_varint(buf, end, &p, &key_len, "key length") < 0
        || take_bytes(buf, end, &p, key_len, &f->key, "key") < 0
        || read_varint(buf, end, &p, &value_len, "value length") < 0
        || take_bytes(buf, end, &p, value_len, &f->value, "value") < 0
        || read_varint(buf, end, &p, &count, "header count") < 0)
        return -1;
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "a negative header count (%d)", (int)count);
        return -1;
    }
    f->headers_at = p;
    for (int32_t i = 0; i < count; i++) {
        if (read_varint(buf, end, &p, &len, "header key length") < 0)
            return -1;
        if (len < 0) {
            PyErr_Format(PyExc_ValueError, "a header key of negative length (%d)", (int)len);
            return -1;
        }
        if (take_bytes(buf, end, &p, len, &ignored, "header key") < 0
            || read_varint(buf, end, &p, &len, "header value length") < 0
            || take_bytes(buf, end, &p, len, &ignored, "header value") < 0)
            return -1;
    }
    if (p != end) {
        PyErr_Format(PyExc_ValueError,
                     "a record's length says %d bytes, its fields take %zd",
                     (int)length, (Py_ssize_t)(p - (end - length)));
        return -1;
    }
    f->key_len = key_len;
    f->value_len = value_len;
    f->header_count = count;
    /* unsigned arithmetic: wraps instead of overflowing (a broker never sends such values) */
    f->offset = (int64_t)((uint64_t)self->base_offset + (uint64_t)(int64_t)offset_delta);
    f->timestamp = self->log_append_time
                       ? self->max_timestamp
                       : (int64_t)((uint64_t)self->first_timestamp + (uint64_t)ts_delta);
    self->pos = end;
    self->left -= 1;
    return 0;
}

/* The headers of a parsed record (already checked by parse): a tuple of (str, bytes | None). */
static PyObject *
build_headers(RecordReader *self, const Fields *f)
{
    if (f->header_count == 0) {
        Py_INCREF(self->no_headers);
        return self->no_headers;
    }
    const unsigned char *buf = (const unsigned char *)self->view.buf;
    Py_ssize_t end = self->view.len;
    Py_ssize_t p = f->headers_at;
    PyObject *headers = PyTuple_New(f->header_count);
    if (headers == NULL)
        return NULL;
    for (int32_t i = 0; i < f->header_count; i++) {
        int32_t len;
        const char *at;
        PyObject *key, *value, *pair;
        if (read_varint(buf, end, &p, &len, "header key length") < 0
            || take_bytes(buf, end, &p, len, &at, "header key") < 0)
            goto error;
        key = PyUnicode_DecodeUTF8(at, len, "strict");
        if (key == NULL)
            goto error;
        if (read_varint(buf, end, &p, &len, "header value length") < 0
            || take_bytes(buf, end, &p, len, &at, "header value") < 0) {
            Py_DECREF(key);
            goto error;
        }
        if (at == NULL) {
            value = Py_None;
            Py_INCREF(value);
        } else {
            value = PyBytes_FromStringAndSize(at, len);
            if (value == NULL) {
                Py_DECREF(key);
                goto error;
            }
        }
        pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto error;
        }
        PyTuple_SET_ITEM(pair, 0, key);
        PyTuple_SET_ITEM(pair, 1, value);
        PyTuple_SET_ITEM(headers, i, pair);
    }
    return headers;
error:
    Py_DECREF(headers);
    return NULL;
}

static PyObject *
bytes_or_none(const char *at, Py_ssize_t len)
{
    if (at == NULL) {
        Py_INCREF(Py_None);
        return Py_None;
    }
    return PyBytes_FromStringAndSize(at, len);
}

static PyObject *
size_of(const char *at, Py_ssize_t len)
{
    return PyLong_FromSsize_t(at == NULL ? -1 : len);
}

/* The next record as a value of the record type; NULL with StopIteration unset at the end
   (and no error), NULL with an error set on bad input. */
static PyObject *
next_record(RecordReader *self)
{
    Fields f;
    int more = has_next(self);
    if (more <= 0)
        return NULL;
    if (parse(self, &f) < 0)
        return NULL;
    PyObject *items[RECORD_FIELDS];
    items[0] = self->topic;
    Py_INCREF(items[0]);
    items[1] = self->partition;
    Py_INCREF(items[1]);
    items[2] = PyLong_FromLongLong(f.offset);
    items[3] = PyLong_FromLongLong(f.timestamp);
    items[4] = self->ts_type;
    Py_INCREF(items[4]);
    items[5] = bytes_or_none(f.key, f.key_len);
    items[6] = bytes_or_none(f.value, f.value_len);
    items[7] = Py_None;
    Py_INCREF(items[7]);
    items[8] = size_of(f.key, f.key_len);
    items[9] = size_of(f.value, f.value_len);
    items[10] = build_headers(self, &f);
    PyObject *record = NULL;
    for (int i = 0; i < RECORD_FIELDS; i++) {
        if (items[i] == NULL)
            goto error;
    }
#if PY_VERSION_HEX < 0x030E0000
    /* A tuple subclass without slots of its own: allocated as a tuple of its type, filled. */
    record = self->cls->tp_alloc(self->cls, RECORD_FIELDS);
    if (record == NULL)
        goto error;
    for (int i = 0; i < RECORD_FIELDS; i++)
        PyTuple_SET_ITEM(record, i, items[i]);
    return record;
#else
    /* Tuples cache their hash from 3.14: let tuple.__new__ set the subclass value up. */
    {
        PyObject *plain = PyTuple_New(RECORD_FIELDS);
        if (plain == NULL)
            goto error;
        for (int i = 0; i < RECORD_FIELDS; i++)
            PyTuple_SET_ITEM(plain, i, items[i]);
        PyObject *args = PyTuple_Pack(1, plain);
        Py_DECREF(plain);
        if (args == NULL)
            return NULL;
        record = PyTuple_Type.tp_new(self->cls, args, NULL);
        Py_DECREF(args);
        return record;
    }
#endif
error:
    for (int i = 0; i < RECORD_FIELDS; i++)
        Py_XDECREF(items[i]);
    return NULL;
}

static PyObject *
RecordReader_next(RecordReader *self)
{
    return next_record(self); /* NULL without an error set ends the iteration */
}

static PyObject *
RecordReader_take(RecordReader *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "take(out: list, count: int)");
        return NULL;
    }
    PyObject *out = args[0];
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *record = next_record(self);
        if (record == NULL) {
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_TRUE;
        }
        int failed = PyList_Append(out, record);
        Py_DECREF(record);
        if (failed < 0)
            return NULL;
    }
    int more = has_next(self);
    if (more < 0)
        return NULL;
    return PyBool_FromLong(more == 0);
}

static PyObject *
RecordReader_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *cls, *topic, *partition, *ts_type, *data;
    long long base_offset, first_timestamp, max_timestamp;
    Py_ssize_t count;
    static char *names[] = {"cls", "topic", "partition", "ts_type", "data", "base_offset",
                            "first_timestamp", "max_timestamp", "count", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOLLLn:RecordReader", names, &cls,
                                     &topic, &partition, &ts_type, &data, &base_offset,
                                     &first_timestamp, &max_timestamp, &count))
        return NULL;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)
        || ((PyTypeObject *)cls)->tp_basicsize != PyTuple_Type.tp_basicsize
        || ((PyTypeObject *)cls)->tp_itemsize != PyTuple_Type.tp_itemsize
        || ((PyTypeObject *)cls)->tp_dictoffset != 0
        || ((PyTypeObject *)cls)->tp_weaklistoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "cls must be a tuple subclass without slots");
        return NULL;
    }
    if (!PyLong_Check(ts_type)) {
        PyErr_SetString(PyExc_TypeError, "ts_type must be an int");
        return NULL;
    }
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "a negative record count (%zd)", count);
        return NULL;
    }
    RecordReader *self = (RecordReader *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (PyObject_GetBuffer(data, &self->view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->has_view = 1;
    self->no_headers = PyTuple_New(0);
    if (self->no_headers == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->pos = 0;
    self->left = count;
    self->base_offset = base_offset;
    self->first_timestamp = first_timestamp;
    self->max_timestamp = max_timestamp;
    self->log_append_time = PyLong_AsLong(ts_type) == LOG_APPEND_TIME;
    Py_INCREF(cls);
    self->cls = (PyTypeObject *)cls;
    Py_INCREF(topic);
    self->topic = topic;
    Py_INCREF(partition);
    self->partition = partition;
    Py_INCREF(ts_type);
    self->ts_type = ts_type;
    return (PyObject *)self;
}

static void
RecordReader_dealloc(RecordReader *self)
{
    if (self->has_view)
        PyBuffer_Release(&self->view);
    Py_XDECREF(self->cls);
    Py_XDECREF(self->topic);
    Py_XDECREF(self->partition);
    Py_XDECREF(self->ts_type);
    Py_XDECREF(self->no_headers);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef RecordReader_methods[] = {
    {"take", (PyCFunction)(void (*)(void))RecordReader_take, METH_FASTCALL,
     "take(out, count): append up to count records to the list out; True once the batch "
     "has no record left."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RecordReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aiogroup.consumer._native_records.RecordReader",
    .tp_basicsize = sizeof(RecordReader),
    .tp_dealloc = (destructor)RecordReader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RecordReader(cls, topic, partition, ts_type, data, base_offset, "
              "first_timestamp, max_timestamp, count): the records of a v2 batch's records "
              "section, as values of cls.",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)RecordReader_next,
    .tp_methods = RecordReader_methods,
    .tp_new = RecordReader_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "aiogroup.consumer._native_records",
    .m_doc = "The records of a v2 record batch decoded in C (optional accelerator).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__native_records(void)
{
    if (PyType_Ready(&RecordReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&RecordReaderType);
    if (PyModule_AddObject(m, "RecordReader", (PyObject *)&RecordReaderType) < 0) {
        Py_DECREF(&RecordReaderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
