/* A hit's whole explanation for a text of any characters with a few space-free pieces of non-ASCII
 * ones (a module function of _kernels, registered in _kernels.c).
 *
 * Why: one hit in ten of the synthetic space holds a few such pieces (β, –, ±), and explaining it in
 * Python (the pieces found by regex, the spans merged, the snippet's window, snap and byte ranges)
 * cost as much as the nine ASCII hits' compiled explanations together (docs/design/engine.md,
 * "Explanations"). Here the pieces are blanked out for the compiled ASCII finder, their own tokens
 * come from the query's finder (termfind.TermFinder.hits), and the matches and the snippet are
 * made as _kernels_explain.c makes an ASCII text's, the window over a str of any kind; the Python
 * stays the reference (tests/engine/test_explain_native.py compares the two). One scalar path:
 * nothing to twin.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_kernels.h"

const char engram_mostly_ascii_explain_doc[] =
"mostly_ascii_explain(text, wanted, ..., snippet_type, max_chars, hits, is_mark, few) -> (matches, snippet or None) or None\n"
"--\n\n"
"ascii_explain for a text of any characters with at most `few` space-free pieces holding non-ASCII\n"
"ones (None when it has more), as termfind.find_terms_mostly_ascii finds its terms: the rest of the\n"
"text as ascii_explain reads it, each such piece's (term, start, end) tokens from hits(piece);\n"
"is_mark(char) says whether a non-ASCII character is a combining mark (explain._is_mark).";

/* The spans of the blanked text's ASCII part with each piece's own (hits(piece)) in order; -1 on error. */
static int with_pieces(PyObject *text, const engram_spans *plain, const Py_ssize_t *pieces, Py_ssize_t npieces,
                       PyObject *hits, engram_spans *out)
{
    Py_ssize_t i = 0;
    for (Py_ssize_t p = 0; p < npieces; p++) {
        Py_ssize_t left = pieces[2 * p], right = pieces[2 * p + 1];
        for (; i < plain->n && plain->items[i].start < left; i++)
            if (engram_spans_push(out, plain->items[i].start, plain->items[i].end, plain->items[i].term) < 0)
                return -1;
        PyObject *piece = PyUnicode_Substring(text, left, right), *found = NULL;
        if (piece == NULL)
            return -1;
        found = PyObject_CallOneArg(hits, piece);
        Py_DECREF(piece);
        if (found == NULL)
            return -1;
        int status = PyList_Check(found) ? 0 : -1;
        if (status < 0)
            PyErr_SetString(PyExc_TypeError, "hits() must give a list");
        for (Py_ssize_t h = 0; status == 0 && h < PyList_GET_SIZE(found); h++) {
            PyObject *tok = PyList_GET_ITEM(found, h);
            if (!PyTuple_Check(tok) || PyTuple_GET_SIZE(tok) != 3) {
                PyErr_SetString(PyExc_TypeError, "a hit must be (term, start, end)");
                status = -1;
                break;
            }
            Py_ssize_t a = PyLong_AsSsize_t(PyTuple_GET_ITEM(tok, 1)), b = PyLong_AsSsize_t(PyTuple_GET_ITEM(tok, 2));
            if (PyErr_Occurred() || engram_spans_push(out, left + a, left + b, PyTuple_GET_ITEM(tok, 0)) < 0)
                status = -1;
        }
        Py_DECREF(found);
        if (status < 0)
            return -1;
    }
    for (; i < plain->n; i++)
        if (engram_spans_push(out, plain->items[i].start, plain->items[i].end, plain->items[i].term) < 0)
            return -1;
    return 0;
}

PyObject *engram_mostly_ascii_explain(PyObject *self, PyObject *args)
{
    PyObject *text, *wanted, *probes, *cache, *analyze, *stem, *stopwords, *stem_probes, *exact_terms, *stem_cache;
    PyObject *words, *others, *tags, *source, *made, *match_type, *snippet_type, *hits, *is_mark;
    Py_ssize_t max_chars, few;
    if (!PyArg_ParseTuple(args, "UO!O!O!OOOO!O!O!O!OOOO!OOnOOn:mostly_ascii_explain", &text, &PySet_Type, &wanted,
                          &PyTuple_Type, &probes, &PyDict_Type, &cache, &analyze, &stem, &stopwords, &PyTuple_Type,
                          &stem_probes, &PyTuple_Type, &exact_terms, &PyDict_Type, &stem_cache, &PyTuple_Type, &words,
                          &others, &tags, &source, &PyDict_Type, &made, &match_type, &snippet_type, &max_chars, &hits,
                          &is_mark, &few))
        return NULL;
    if (max_chars <= 0 || few < 0) {
        PyErr_SetString(PyExc_ValueError, "max_chars must be positive and few not negative");
        return NULL;
    }
    Py_ssize_t most = 0;
    if (engram_check_words(words, &most) < 0 || engram_intern_names() < 0)
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *d = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), npieces = 0;
    Py_ssize_t *pieces = PyMem_Malloc(((size_t)few + 1) * 2 * sizeof(Py_ssize_t));
    engram_spans plain = {NULL, 0, 0}, spans = {NULL, 0, 0};
    PyObject *blank = NULL, *result = NULL;
    if (pieces == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* The space-free pieces (bounded by plain spaces, as termfind._piece_at) holding non-ASCII characters. */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyUnicode_READ(kind, d, i) < 128)
            continue;
        if (npieces == few) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        Py_ssize_t left = i, right = i;
        while (left > 0 && PyUnicode_READ(kind, d, left - 1) != ' ')
            left--;
        while (right < n && PyUnicode_READ(kind, d, right) != ' ')
            right++;
        pieces[2 * npieces] = left;
        pieces[2 * npieces + 1] = right;
        npieces++;
        i = right; /* the next piece starts after this one's space */
    }
    /* The text with those pieces blanked out (spaces: no chunk crosses one, every position stays). */
    if ((blank = PyUnicode_New(n, 127)) == NULL)
        goto done;
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(blank);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, d, i);
        out[i] = c < 128 ? (Py_UCS1)c : ' ';
    }
    for (Py_ssize_t p = 0; p < npieces; p++)
        memset(out + pieces[2 * p], ' ', (size_t)(pieces[2 * p + 1] - pieces[2 * p]));
    if (engram_find_ascii_spans(blank, wanted, probes, cache, analyze, stem, stopwords, stem_probes, exact_terms,
                                stem_cache, &plain) < 0
        || with_pieces(text, &plain, pieces, npieces, hits, &spans) < 0)
        goto done;
    result = engram_explain_spans(text, &spans, words, others, tags, source, made, match_type, snippet_type, max_chars,
                           is_mark, most);
done:
    Py_XDECREF(blank);
    PyMem_Free(pieces);
    engram_spans_clear(&plain);
    engram_spans_clear(&spans);
    return result;
}
