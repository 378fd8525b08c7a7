/* garden.engram's search hits written as JSON in one compiled call: each hit's memoryView, its
 * memory's own fields (kept encoded by views.py) followed by its similarity and match.
 *
 * Why this is ours and not orjson's alone: orjson encodes fast, but a search's ten hits were first
 * built as ten nests of Python dicts and lists (the match, its terms, its highlights) and encoded
 * one by one; that was a quarter of a served search's own path (bench/garden_path.py). Here the same
 * bytes are written straight from the hits. Every value a hit can hold that this file does not write
 * exactly as orjson would (anything but str, int and float, a non-finite number, a lone surrogate)
 * makes the call answer None, and views.py writes the hits the old way (which also raises what it
 * raised before). tests/engram/test_views.py holds the two to the same bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Out;

enum { OK = 0, FAILED = -1, UNSUPPORTED = 1 }; /* FAILED: a Python error is set */

static PyObject *s_similarity, *s_vector_rank, *s_bm25, *s_keyword_rank, *s_terms, *s_snippet,
    *s_fusion, *s_term, *s_kind, *s_field, *s_text, *s_highlights;

static int grow(Out *out, Py_ssize_t more)
{
    if (out->len + more <= out->cap)
        return OK;
    Py_ssize_t cap = out->cap * 2 > out->len + more ? out->cap * 2 : out->len + more;
    char *data = PyMem_Realloc(out->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    out->data = data;
    out->cap = cap;
    return OK;
}

static int put(Out *out, const char *bytes, Py_ssize_t n)
{
    if (grow(out, n) != OK)
        return FAILED;
    memcpy(out->data + out->len, bytes, (size_t)n);
    out->len += n;
    return OK;
}

#define PUT_LITERAL(out, s) put((out), (s), (Py_ssize_t)(sizeof(s) - 1))
/* A literal, after a comma when `more` (an element or member came before it). */
#define PUT_NEXT(out, more, s) put((out), ("," s) + !(more), (Py_ssize_t)sizeof(s) - !(more))

/* A decimal integer (by hand: snprintf's format parsing cost more than the rest of a hit). */
static int put_int(Out *out, long long value)
{
    char digits[24];
    char *end = digits + sizeof(digits), *p = end;
    unsigned long long magnitude = value < 0 ? 0ull - (unsigned long long)value : (unsigned long long)value;
    do {
        *--p = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude);
    if (value < 0)
        *--p = '-';
    return put(out, p, end - p);
}

/* A str as a JSON string, escaped as orjson escapes: '"', '\\', and the control characters below
 * 0x20 (\b \t \n \f \r short, the others as \u00XX); everything else as its UTF-8 bytes. */
static int put_str(Out *out, PyObject *obj)
{
    static const char hex[] = "0123456789abcdef";
    if (!PyUnicode_CheckExact(obj))
        return UNSUPPORTED;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(obj, &n);
    if (s == NULL) { /* a lone surrogate: orjson refuses it, and so does the old way */
        PyErr_Clear();
        return UNSUPPORTED;
    }
    if (grow(out, 6 * n + 2) != OK) /* the most an escape can take: \u00XX for one byte */
        return FAILED;
    char *w = out->data + out->len;
    *w++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *w++ = (char)c;
            continue;
        }
        *w++ = '\\';
        switch (c) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '\b': *w++ = 'b'; break;
        case '\t': *w++ = 't'; break;
        case '\n': *w++ = 'n'; break;
        case '\f': *w++ = 'f'; break;
        case '\r': *w++ = 'r'; break;
        default:
            *w++ = 'u';
            *w++ = '0';
            *w++ = '0';
            *w++ = hex[c >> 4];
            *w++ = hex[c & 15];
        }
    }
    *w++ = '"';
    out->len = w - out->data;
    return OK;
}

/* Python's round(value * scale) of a float, as an integer (ties to even, as round does); UNSUPPORTED
 * where round would raise or orjson could not write the integer. */
static int rounded(PyObject *obj, double scale, long long *value)
{
    if (!PyFloat_CheckExact(obj))
        return UNSUPPORTED;
    double x = PyFloat_AS_DOUBLE(obj) * scale;
    if (!isfinite(x) || fabs(x) > 9.0e15)
        return UNSUPPORTED;
    *value = (long long)nearbyint(x);
    return OK;
}

/* An exact int that fits in a long long. */
static int integer(PyObject *obj, long long *value)
{
    if (!PyLong_CheckExact(obj))
        return UNSUPPORTED;
    int overflow;
    *value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow)
        return UNSUPPORTED;
    if (*value == -1 && PyErr_Occurred())
        return FAILED;
    return OK;
}

#define CHECK(call)                 \
    do {                            \
        int status_ = (call);       \
        if (status_ != OK) {        \
            status = status_;       \
            goto done;              \
        }                           \
    } while (0)

/* A new reference to obj.name, or NULL with an error set. */
#define GET(var, obj, name)                        \
    do {                                           \
        var = PyObject_GetAttr((obj), (name));     \
        if (var == NULL) {                         \
            status = FAILED;                       \
            goto done;                             \
        }                                          \
    } while (0)

static int put_terms(Out *out, PyObject *terms)
{
    if (!PyTuple_CheckExact(terms) && !PyList_CheckExact(terms))
        return UNSUPPORTED;
    int status = OK;
    PyObject *term = NULL, *kind = NULL, *field = NULL;
    CHECK(PUT_LITERAL(out, "["));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(terms); i++) {
        /* Held while read: an attribute's code (none of TermMatch's has any) could change the sequence. */
        PyObject *match = Py_NewRef(PySequence_Fast_GET_ITEM(terms, i));
        term = PyObject_GetAttr(match, s_term);
        kind = term ? PyObject_GetAttr(match, s_kind) : NULL;
        field = kind ? PyObject_GetAttr(match, s_field) : NULL;
        Py_DECREF(match);
        if (field == NULL) {
            status = FAILED;
            goto done;
        }
        CHECK(PUT_NEXT(out, i, "{\"term\":"));
        CHECK(put_str(out, term));
        CHECK(PUT_LITERAL(out, ",\"kind\":"));
        CHECK(put_str(out, kind));
        CHECK(PUT_LITERAL(out, ",\"field\":"));
        CHECK(put_str(out, field));
        CHECK(PUT_LITERAL(out, "}"));
        Py_CLEAR(term);
        Py_CLEAR(kind);
        Py_CLEAR(field);
    }
    CHECK(PUT_LITERAL(out, "]"));
done:
    Py_XDECREF(term);
    Py_XDECREF(kind);
    Py_XDECREF(field);
    return status;
}

/* The match's snippet member (after a comma when `more`). */
static int put_snippet(Out *out, PyObject *snippet, int more)
{
    int status = OK;
    PyObject *field = NULL, *text = NULL, *highlights = NULL;
    GET(field, snippet, s_field);
    GET(text, snippet, s_text);
    GET(highlights, snippet, s_highlights);
    if (!PyTuple_CheckExact(highlights) && !PyList_CheckExact(highlights)) {
        status = UNSUPPORTED;
        goto done;
    }
    CHECK(PUT_NEXT(out, more, "\"snippet\":{\"field\":"));
    CHECK(put_str(out, field));
    CHECK(PUT_LITERAL(out, ",\"text\":"));
    CHECK(put_str(out, text));
    CHECK(PUT_LITERAL(out, ",\"highlights\":["));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(highlights); i++) {
        PyObject *span = PySequence_Fast_GET_ITEM(highlights, i);
        long long start, end;
        if (!PyTuple_CheckExact(span) || PyTuple_GET_SIZE(span) != 2) {
            status = UNSUPPORTED;
            goto done;
        }
        CHECK(integer(PyTuple_GET_ITEM(span, 0), &start));
        CHECK(integer(PyTuple_GET_ITEM(span, 1), &end));
        CHECK(PUT_NEXT(out, i, "{\"byteStart\":"));
        CHECK(put_int(out, start));
        CHECK(PUT_LITERAL(out, ",\"byteEnd\":"));
        CHECK(put_int(out, end));
        CHECK(PUT_LITERAL(out, "}"));
    }
    CHECK(PUT_LITERAL(out, "]}"));
done:
    Py_XDECREF(field);
    Py_XDECREF(text);
    Py_XDECREF(highlights);
    return status;
}

/* One hit's memoryView: "{" fields, then its similarity and match as views.hit_json writes them. */
static int put_hit(Out *out, PyObject *hit, PyObject *fields, int mode_keyword, int mode_vector, int mode_hybrid)
{
    int status = OK;
    PyObject *cosine = NULL, *vector_rank = NULL, *bm25 = NULL, *keyword_rank = NULL, *terms = NULL,
             *snippet = NULL, *fusion = NULL;
    if (!PyBytes_CheckExact(fields))
        return UNSUPPORTED;
    CHECK(PUT_LITERAL(out, "{"));
    CHECK(put(out, PyBytes_AS_STRING(fields), PyBytes_GET_SIZE(fields)));
    int has_similarity = 0;
    long long similarity = 0;
    GET(cosine, hit, s_similarity);
    if (!mode_keyword && cosine != Py_None) {
        CHECK(rounded(cosine, 1000.0, &similarity));
        similarity = similarity < 0 ? 0 : similarity > 1000 ? 1000 : similarity;
        has_similarity = 1;
        CHECK(PUT_LITERAL(out, ",\"similarity\":"));
        CHECK(put_int(out, similarity));
    }
    if (!mode_vector) {
        int members = 0;
        CHECK(PUT_LITERAL(out, ",\"match\":{"));
        GET(vector_rank, hit, s_vector_rank);
        if (has_similarity && mode_hybrid && vector_rank != Py_None) {
            long long rank;
            CHECK(integer(vector_rank, &rank));
            CHECK(PUT_LITERAL(out, "\"vector\":{\"rank\":"));
            CHECK(put_int(out, rank));
            CHECK(PUT_LITERAL(out, ",\"similarity\":"));
            CHECK(put_int(out, similarity));
            CHECK(PUT_LITERAL(out, "}"));
            members++;
        }
        GET(bm25, hit, s_bm25);
        GET(keyword_rank, hit, s_keyword_rank);
        int truthy = PyObject_IsTrue(bm25);
        if (truthy < 0) {
            status = FAILED;
            goto done;
        }
        if (truthy && keyword_rank != Py_None) {
            long long rank, score;
            CHECK(integer(keyword_rank, &rank));
            CHECK(rounded(bm25, 100.0, &score));
            CHECK(PUT_NEXT(out, members, "\"keyword\":{\"rank\":"));
            CHECK(put_int(out, rank));
            CHECK(PUT_LITERAL(out, ",\"score\":"));
            CHECK(put_int(out, score < 0 ? 0 : score));
            CHECK(PUT_LITERAL(out, ",\"terms\":"));
            GET(terms, hit, s_terms);
            CHECK(put_terms(out, terms));
            CHECK(PUT_LITERAL(out, "}"));
            members++;
        }
        GET(snippet, hit, s_snippet);
        if (snippet != Py_None) {
            CHECK(put_snippet(out, snippet, members));
            members++;
        }
        GET(fusion, hit, s_fusion);
        if (fusion != Py_None) {
            CHECK(PUT_NEXT(out, members, "\"fusion\":"));
            CHECK(put_str(out, fusion));
        }
        CHECK(PUT_LITERAL(out, "}"));
    }
    CHECK(PUT_LITERAL(out, "}"));
done:
    Py_XDECREF(cosine);
    Py_XDECREF(vector_rank);
    Py_XDECREF(bm25);
    Py_XDECREF(keyword_rank);
    Py_XDECREF(terms);
    Py_XDECREF(snippet);
    Py_XDECREF(fusion);
    return status;
}

PyDoc_STRVAR(hits_json_doc,
"hits_json(hits, mode, fields) -> bytes | None\n--\n\n"
"The JSON array of the hits' memoryViews in a search of mode (\"hybrid\", \"keyword\" or \"vector\"):\n"
"each hit's memory fields (fields[i]: bytes, the JSON members without braces), then its similarity\n"
"and match, byte for byte as views.hit_json writes them. None when a hit holds a value this call\n"
"does not write (views.py then writes the hits itself).");

static PyObject *hits_json(PyObject *self, PyObject *args)
{
    PyObject *hits, *mode, *fields;
    if (!PyArg_ParseTuple(args, "O!UO!:hits_json", &PyList_Type, &hits, &mode, &PyList_Type, &fields))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(hits);
    if (PyList_GET_SIZE(fields) != n) {
        PyErr_Format(PyExc_ValueError, "%zd hits but %zd fields", n, PyList_GET_SIZE(fields));
        return NULL;
    }
    int mode_keyword = PyUnicode_CompareWithASCIIString(mode, "keyword") == 0;
    int mode_vector = PyUnicode_CompareWithASCIIString(mode, "vector") == 0;
    int mode_hybrid = PyUnicode_CompareWithASCIIString(mode, "hybrid") == 0;
    Out out = {PyMem_Malloc(4096), 0, 4096};
    if (out.data == NULL)
        return PyErr_NoMemory();
    /* Each hit and its fields held while written (what an attribute's code might do to the lists). */
    PyObject *held_hits = PyList_AsTuple(hits), *held_fields = held_hits ? PyList_AsTuple(fields) : NULL;
    if (held_fields == NULL) {
        Py_XDECREF(held_hits);
        PyMem_Free(out.data);
        return NULL;
    }
    int status = PUT_LITERAL(&out, "[");
    for (Py_ssize_t i = 0; i < n && status == OK; i++) {
        if (i)
            status = PUT_LITERAL(&out, ",");
        if (status == OK)
            status = put_hit(&out, PyTuple_GET_ITEM(held_hits, i), PyTuple_GET_ITEM(held_fields, i), mode_keyword,
                             mode_vector, mode_hybrid);
    }
    Py_DECREF(held_hits);
    Py_DECREF(held_fields);
    if (status == OK)
        status = PUT_LITERAL(&out, "]");
    PyObject *result = status == OK ? PyBytes_FromStringAndSize(out.data, out.len)
                       : status == UNSUPPORTED ? Py_NewRef(Py_None) : NULL;
    PyMem_Free(out.data);
    return result;
}

static PyMethodDef methods[] = {
    {"hits_json", hits_json, METH_VARARGS, hits_json_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_views", "garden.engram's search hits as JSON.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__views(void)
{
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&s_similarity, "similarity"}, {&s_vector_rank, "vector_rank"},
        {&s_bm25, "bm25"}, {&s_keyword_rank, "keyword_rank"}, {&s_terms, "terms"}, {&s_snippet, "snippet"},
        {&s_fusion, "fusion"}, {&s_term, "term"}, {&s_kind, "kind"}, {&s_field, "field"}, {&s_text, "text"},
        {&s_highlights, "highlights"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL)
            return NULL;
    return PyModule_Create(&module);
}
