/* Finding a query's terms in an ASCII text (a module function of _kernels, registered in _kernels.c).
 *
 * Why: the explanation of every returned hit needs the spans of the query's terms in the hit's
 * text, and finding them in Python (probes, pieces, sets) was about half of an explained search's
 * cost (docs/design/engine.md). Here the ASCII chunk grammar is cut in C, a chunk is looked at only
 * when its lower-case form holds one of the wanted terms' probes (termfind._probe: every ASCII
 * source of a term holds its probe), and the terms of such a chunk come from the analyzer's own
 * cache of chunk analyses (or the analyzer itself, called back), so the spans are exactly the
 * analyzer's tokens filtered by term. One scalar loop: no vectorised variant to twin.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_kernels.h"

const char engram_ascii_spans_doc[] =
"ascii_spans(text, wanted, probes, cache, analyze) -> list\n--\n\n"
"The (start, end, term) character spans, in order, of the tokens of an ASCII text whose term is in\n"
"wanted (a set of str). probes (a tuple of non-empty ASCII str) must hold a substring of the\n"
"lower-case source of every wanted ASCII term; cache (a dict) maps a chunk to its analysis\n"
"(terms, ((kind, start, end), ...)), and analyze(chunk) gives the analysis of a chunk not in it.";

/* The characters of the ASCII chunk pattern's words ([A-Za-z0-9_]). */
static inline int is_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The end of the chunk starting at a word character at i: words joined by ://, :: or one of ./-:'
 * (each followed by a word character), as the analyzer's _ASCII_CHUNK_RE matches it. */
static Py_ssize_t chunk_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i)
{
    while (i < n && is_word(s[i]))
        i++;
    for (;;) {
        Py_ssize_t join = 0;
        if (i + 3 < n && s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/' && is_word(s[i + 3]))
            join = 3;
        else if (i + 2 < n && s[i] == ':' && s[i + 1] == ':' && is_word(s[i + 2]))
            join = 2;
        else if (i + 1 < n && strchr("./-:'", s[i]) != NULL && s[i] != 0 && is_word(s[i + 1]))
            join = 1;
        if (!join)
            return i;
        i += join;
        while (i < n && is_word(s[i]))
            i++;
    }
}

/* Append a chunk's wanted tokens to out; -1 with an exception set on failure. */
static int chunk_spans(PyObject *text, Py_ssize_t start, Py_ssize_t end, PyObject *wanted, PyObject *cache,
                       PyObject *analyze, PyObject *out)
{
    PyObject *chunk = PyUnicode_Substring(text, start, end);
    if (chunk == NULL)
        return -1;
    PyObject *analysis = PyDict_GetItemWithError(cache, chunk); /* borrowed */
    if (analysis != NULL)
        Py_INCREF(analysis);
    else if (!PyErr_Occurred())
        analysis = PyObject_CallOneArg(analyze, chunk);
    Py_DECREF(chunk);
    if (analysis == NULL)
        return -1;
    int status = -1;
    PyObject *terms, *meta;
    if (!PyTuple_Check(analysis) || PyTuple_GET_SIZE(analysis) != 2
        || !PyTuple_Check(terms = PyTuple_GET_ITEM(analysis, 0)) || !PyTuple_Check(meta = PyTuple_GET_ITEM(analysis, 1))
        || PyTuple_GET_SIZE(terms) != PyTuple_GET_SIZE(meta)) {
        PyErr_SetString(PyExc_TypeError, "a chunk's analysis must be (terms, meta) tuples of one length");
        goto done;
    }
    for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(terms); t++) {
        PyObject *term = PyTuple_GET_ITEM(terms, t);
        int found = PySet_Contains(wanted, term);
        if (found < 0)
            goto done;
        if (!found)
            continue;
        PyObject *where = PyTuple_GET_ITEM(meta, t);
        if (!PyTuple_Check(where) || PyTuple_GET_SIZE(where) != 3) {
            PyErr_SetString(PyExc_TypeError, "a term's place must be (kind, start, end)");
            goto done;
        }
        Py_ssize_t a = PyLong_AsSsize_t(PyTuple_GET_ITEM(where, 1)), b = PyLong_AsSsize_t(PyTuple_GET_ITEM(where, 2));
        if ((a == -1 || b == -1) && PyErr_Occurred())
            goto done;
        PyObject *span = Py_BuildValue("(nnO)", start + a, start + b, term);
        if (span == NULL)
            goto done;
        int appended = PyList_Append(out, span);
        Py_DECREF(span);
        if (appended < 0)
            goto done;
    }
    status = 0;
done:
    Py_DECREF(analysis);
    return status;
}

PyObject *engram_ascii_spans(PyObject *self, PyObject *args)
{
    PyObject *text, *wanted, *probes, *cache, *analyze;
    if (!PyArg_ParseTuple(args, "UO!O!O!O:ascii_spans", &text, &PySet_Type, &wanted, &PyTuple_Type, &probes,
                          &PyDict_Type, &cache, &analyze))
        return NULL;
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "text must be ASCII");
        return NULL;
    }
    Py_ssize_t np = PyTuple_GET_SIZE(probes);
    for (Py_ssize_t p = 0; p < np; p++) {
        PyObject *probe = PyTuple_GET_ITEM(probes, p);
        if (!PyUnicode_Check(probe) || !PyUnicode_IS_ASCII(probe) || PyUnicode_GET_LENGTH(probe) == 0) {
            PyErr_SetString(PyExc_ValueError, "probes must be non-empty ASCII str");
            return NULL;
        }
    }
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    PyObject *out = PyList_New(0);
    if (out == NULL || n == 0 || np == 0)
        return out;
    /* The lower-case text, and per character the chunk it belongs to (-1: none) and whether a
     * probe starts inside that chunk. */
    unsigned char *lowered = PyMem_Malloc((size_t)n + 1);
    int32_t *owner = PyMem_Malloc((size_t)n * sizeof(int32_t));
    Py_ssize_t *bounds = PyMem_Malloc((size_t)n * 2 * sizeof(Py_ssize_t));
    uint8_t *marked = PyMem_Calloc((size_t)n, 1);
    if (lowered == NULL || owner == NULL || bounds == NULL || marked == NULL) {
        PyErr_NoMemory();
        Py_CLEAR(out);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        lowered[i] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
        owner[i] = -1;
    }
    lowered[n] = 0;
    Py_ssize_t chunks = 0;
    for (Py_ssize_t i = 0; i < n;) {
        if (!is_word(s[i])) {
            i++;
            continue;
        }
        Py_ssize_t end = chunk_end(s, n, i);
        bounds[2 * chunks] = i;
        bounds[2 * chunks + 1] = end;
        for (Py_ssize_t j = i; j < end; j++)
            owner[j] = (int32_t)chunks;
        chunks++;
        i = end;
    }
    for (Py_ssize_t p = 0; p < np; p++) {
        PyObject *probe = PyTuple_GET_ITEM(probes, p);
        const char *needle = (const char *)PyUnicode_1BYTE_DATA(probe);
        Py_ssize_t len = PyUnicode_GET_LENGTH(probe);
        const unsigned char *at = lowered, *stop = lowered + n;
        while (stop - at >= len) {
            const unsigned char *hit = memmem(at, (size_t)(stop - at), needle, (size_t)len);
            if (hit == NULL)
                break;
            int32_t c = owner[hit - lowered];
            if (c >= 0) {
                marked[c] = 1;
                /* The rest of this chunk is marked already: look on after it. */
                at = lowered + bounds[2 * c + 1];
            } else {
                at = hit + 1;
            }
        }
    }
    for (Py_ssize_t c = 0; c < chunks; c++)
        if (marked[c] && chunk_spans(text, bounds[2 * c], bounds[2 * c + 1], wanted, cache, analyze, out) < 0) {
            Py_CLEAR(out);
            break;
        }
done:
    PyMem_Free(lowered);
    PyMem_Free(owner);
    PyMem_Free(bounds);
    PyMem_Free(marked);
    return out;
}
