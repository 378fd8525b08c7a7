/* The snippet window of an ASCII body (module functions and helpers of _kernels, registered in
 * _kernels.c; _kernels_explain.c uses the helpers).
 *
 * Why: explain._window and explain._snap choose a hit's snippet in Python; for an ASCII body the
 * same choice is made here (the two pointers over the spans, the centring, the snap to word
 * boundaries), as tests/engine/test_explain.py checks against the Python on random bodies. One
 * scalar path: nothing to twin.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_kernels.h"

const char engram_snippet_bounds_doc[] =
"snippet_bounds(body, spans, max_chars) -> (start, end)\n--\n\n"
"The snippet window of an ASCII body, as explain._window and explain._snap choose it: about\n"
"max_chars characters covering the most distinct terms of spans (a list of (start, end, term),\n"
"sorted by start, not empty), then the earliest such, centred and moved to word boundaries.";

/* Whether the character at i of an ASCII body is whitespace as str.isspace() says. */
static inline int space_at(const unsigned char *s, Py_ssize_t i)
{
    return Py_UNICODE_ISSPACE(s[i]);
}

Py_ssize_t engram_snap_end(const unsigned char *s, Py_ssize_t length, Py_ssize_t end, Py_ssize_t keep_end)
{
    /* explain._snap's end: back to the last space when the window cuts a word, never before keep_end. */
    if (end < length && !space_at(s, end) && !space_at(s, end - 1)) {
        for (Py_ssize_t k = end - 1; k >= keep_end; k--)
            if (space_at(s, k)) {
                end = k;
                break;
            }
    }
    while (end > keep_end && space_at(s, end - 1))
        end--;
    return end;
}

/* explain._window's choice before the snap: two pointers over the spans (spans[i..j) fit in a
 * window starting at spans[i]), the covered part, and the window centred on it inside the body. */
static void cover(Py_ssize_t length, const Py_ssize_t *bounds, const Py_ssize_t *ids, Py_ssize_t n,
                  Py_ssize_t max_chars, Py_ssize_t *counts, Py_ssize_t *covered, Py_ssize_t *window)
{
    Py_ssize_t best_count = 0, best_first = 0, best_last = 0, in_window = 0, j = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t first_start = bounds[2 * i];
        if (j < i)
            j = i;
        while (j < n && bounds[2 * j + 1] - first_start <= max_chars) {
            if (counts[ids[j]]++ == 0)
                in_window++;
            j++;
        }
        if (in_window > best_count) {
            best_count = in_window;
            best_first = i;
            best_last = j - 1;
        }
        if (j > i && --counts[ids[i]] == 0)
            in_window--;
    }
    Py_ssize_t covered_start = bounds[2 * best_first], covered_end = bounds[2 * best_first + 1];
    for (Py_ssize_t i = best_first + 1; i <= best_last; i++)
        if (bounds[2 * i + 1] > covered_end)
            covered_end = bounds[2 * i + 1];
    if (covered_end > covered_start + max_chars)
        covered_end = covered_start + max_chars;
    Py_ssize_t start = covered_start - (max_chars - (covered_end - covered_start)) / 2;
    start = start > 0 ? start : 0;
    Py_ssize_t end = start + max_chars < length ? start + max_chars : length;
    start = end - max_chars > 0 ? end - max_chars : 0;
    covered[0] = covered_start;
    covered[1] = covered_end;
    window[0] = start;
    window[1] = end;
}

void engram_window(const unsigned char *s, Py_ssize_t length, const Py_ssize_t *bounds, const Py_ssize_t *ids,
                   Py_ssize_t n, Py_ssize_t max_chars, Py_ssize_t *counts, Py_ssize_t *start_out, Py_ssize_t *end_out)
{
    Py_ssize_t covered[2], window[2];
    cover(length, bounds, ids, n, max_chars, counts, covered, window);
    Py_ssize_t covered_start = covered[0], start = window[0];
    /* explain._snap (an ASCII body has no combining marks). */
    if (start > 0 && !space_at(s, start - 1)) {
        for (Py_ssize_t k = start; k < covered_start; k++)
            if (space_at(s, k)) {
                start = k + 1;
                break;
            }
    }
    while (start < covered_start && space_at(s, start))
        start++;
    *start_out = start;
    *end_out = engram_snap_end(s, length, window[1], covered[1]);
}

/* Whether the character at i of a body of any kind is whitespace as str.isspace() says. */
static inline int space_any(int kind, const void *d, Py_ssize_t i)
{
    return Py_UNICODE_ISSPACE(PyUnicode_READ(kind, d, i));
}

/* Whether the character at i is a combining mark: is_mark(char) answers for a non-ASCII one
 * (explain._is_mark: an ASCII character never is one); -1 with an exception set on error. */
static int mark_any(int kind, const void *d, Py_ssize_t i, PyObject *is_mark)
{
    Py_UCS4 c = PyUnicode_READ(kind, d, i);
    if (c < 128)
        return 0;
    PyObject *ch = PyUnicode_FromOrdinal((int)c);
    if (ch == NULL)
        return -1;
    PyObject *got = PyObject_CallOneArg(is_mark, ch);
    Py_DECREF(ch);
    if (got == NULL)
        return -1;
    int r = PyObject_IsTrue(got);
    Py_DECREF(got);
    return r;
}

int engram_snap_end_any(PyObject *body, Py_ssize_t end, Py_ssize_t keep_end, PyObject *is_mark, Py_ssize_t *end_out)
{
    /* explain._snap's end in any body: back to the last space when the window cuts a word, never
     * before keep_end, then past the combining marks that belong to the last character. */
    int kind = PyUnicode_KIND(body);
    const void *d = PyUnicode_DATA(body);
    Py_ssize_t length = PyUnicode_GET_LENGTH(body);
    if (end < length && !space_any(kind, d, end) && !space_any(kind, d, end - 1)) {
        for (Py_ssize_t k = end - 1; k >= keep_end; k--)
            if (space_any(kind, d, k)) {
                end = k;
                break;
            }
    }
    while (end > keep_end && space_any(kind, d, end - 1))
        end--;
    int r;
    while (end < length && (r = mark_any(kind, d, end, is_mark)) != 0) {
        if (r < 0)
            return -1;
        end++;
    }
    *end_out = end;
    return 0;
}

int engram_window_any(PyObject *body, const Py_ssize_t *bounds, const Py_ssize_t *ids, Py_ssize_t n,
                      Py_ssize_t max_chars, Py_ssize_t *counts, PyObject *is_mark, Py_ssize_t *start_out,
                      Py_ssize_t *end_out)
{
    int kind = PyUnicode_KIND(body);
    const void *d = PyUnicode_DATA(body);
    Py_ssize_t covered[2], window[2];
    cover(PyUnicode_GET_LENGTH(body), bounds, ids, n, max_chars, counts, covered, window);
    Py_ssize_t covered_start = covered[0], start = window[0];
    /* explain._snap's start: past the cut word, the spaces, then the marks of the character before. */
    if (start > 0 && !space_any(kind, d, start - 1)) {
        for (Py_ssize_t k = start; k < covered_start; k++)
            if (space_any(kind, d, k)) {
                start = k + 1;
                break;
            }
    }
    while (start < covered_start && space_any(kind, d, start))
        start++;
    int r;
    while (0 < start && start < covered_start && (r = mark_any(kind, d, start, is_mark)) != 0) {
        if (r < 0)
            return -1;
        start++;
    }
    *start_out = start;
    return engram_snap_end_any(body, window[1], covered[1], is_mark, end_out);
}

PyObject *engram_snippet_bounds(PyObject *self, PyObject *args)
{
    PyObject *body, *spans;
    Py_ssize_t max_chars;
    if (!PyArg_ParseTuple(args, "UO!n:snippet_bounds", &body, &PyList_Type, &spans, &max_chars))
        return NULL;
    if (!PyUnicode_IS_ASCII(body)) {
        PyErr_SetString(PyExc_ValueError, "body must be ASCII");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(spans);
    if (n == 0 || max_chars <= 0) {
        PyErr_SetString(PyExc_ValueError, "spans must not be empty and max_chars must be positive");
        return NULL;
    }
    Py_ssize_t *bounds = PyMem_Malloc((size_t)n * 2 * sizeof(Py_ssize_t));
    Py_ssize_t *ids = PyMem_Malloc((size_t)n * sizeof(Py_ssize_t)); /* each span's distinct term, numbered */
    Py_ssize_t *counts = PyMem_Calloc((size_t)n, sizeof(Py_ssize_t));
    PyObject **terms = PyMem_Malloc((size_t)n * sizeof(PyObject *));
    PyObject *result = NULL;
    if (bounds == NULL || ids == NULL || counts == NULL || terms == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t distinct = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *span = PyList_GET_ITEM(spans, i);
        if (!PyTuple_Check(span) || PyTuple_GET_SIZE(span) != 3) {
            PyErr_SetString(PyExc_TypeError, "a span must be (start, end, term)");
            goto done;
        }
        bounds[2 * i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
        bounds[2 * i + 1] = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
        if (PyErr_Occurred())
            goto done;
        PyObject *term = PyTuple_GET_ITEM(span, 2);
        Py_ssize_t id = engram_term_id(terms, &distinct, term);
        if (id < 0)
            goto done;
        ids[i] = id;
    }
    Py_ssize_t start, end;
    engram_window(PyUnicode_1BYTE_DATA(body), PyUnicode_GET_LENGTH(body), bounds, ids, n, max_chars, counts, &start,
                  &end);
    result = Py_BuildValue("(nn)", start, end);
done:
    PyMem_Free(bounds);
    PyMem_Free(ids);
    PyMem_Free(counts);
    PyMem_Free(terms);
    return result;
}
