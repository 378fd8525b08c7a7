/* Finding a query's terms in an ASCII text (a module function of _kernels, registered in _kernels.c).
 *
 * Why: the explanation of every returned hit needs the spans of the query's terms in the hit's
 * text, and finding them in Python (probes, pieces, sets) was about half of an explained search's
 * cost (docs/design/engine.md). Here the ASCII chunk grammar is cut in C, a chunk is looked at only
 * when its lower-case form holds one of the wanted terms' probes (termfind._probe: every ASCII
 * source of a term holds its probe), and the terms of such a chunk are the analyzer's fast path's
 * for a plain word or number (made here from the lower-case text: no substring, no lookup), else
 * come from the analyzer's own cache of chunk analyses (or the analyzer itself, called back), so
 * the spans are exactly the analyzer's tokens filtered by term. One scalar loop: nothing to twin.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_kernels.h"

const char engram_ascii_spans_doc[] =
"ascii_spans(text, wanted, probes, cache, analyze, stem, stopwords) -> list\n--\n\n"
"The (start, end, term) character spans, in order, of the tokens of an ASCII text whose term is in\n"
"wanted (a set of str). probes (a tuple of non-empty ASCII str) must hold a substring of the\n"
"lower-case source of every wanted ASCII term. A plain word or number's terms are found as the\n"
"analyzer's fast path finds them, with stem(word) (the analyzer's cached Snowball stem) and\n"
"stopwords (a set or frozenset); any other chunk's from cache (a dict mapping a chunk to its\n"
"analysis (terms, ((kind, start, end), ...))), or analyze(chunk) where cache lacks it.";

/* The characters of the ASCII chunk pattern's words ([A-Za-z0-9_]). */
static inline int is_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The one-character joins of words inside a chunk: . / - : ' */
static inline int is_join(unsigned char c)
{
    return c == '.' || c == '/' || c == '-' || c == ':' || c == '\'';
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
        else if (i + 1 < n && is_join(s[i]) && is_word(s[i + 1]))
            join = 1;
        if (!join)
            return i;
        i += join;
        while (i < n && is_word(s[i]))
            i++;
    }
}

/* The stem prefix "~" (analyzer.STEM_PREFIX), made once. */
static PyObject *tilde = NULL;

/* Append a (start, end, term) span to out (a new reference to term); -1 with an exception set on failure. */
int engram_spans_push(engram_spans *out, Py_ssize_t start, Py_ssize_t end, PyObject *term)
{
    if (out->n == out->cap) {
        Py_ssize_t cap = out->cap ? 2 * out->cap : 16;
        engram_span *items = PyMem_Realloc(out->items, (size_t)cap * sizeof(engram_span));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        out->items = items;
        out->cap = cap;
    }
    Py_INCREF(term);
    out->items[out->n++] = (engram_span){start, end, term};
    return 0;
}

void engram_spans_clear(engram_spans *spans)
{
    for (Py_ssize_t i = 0; i < spans->n; i++)
        Py_DECREF(spans->items[i].term);
    PyMem_Free(spans->items);
    spans->items = NULL;
    spans->n = spans->cap = 0;
}

/* Whether an ASCII chunk takes the analyzer's fast path (analyzer._chunk_words): digits, or letters
 * of one case, or capitalized, under 16 characters (longer ones may be opaque: the analyzer's rules
 * decide). Its analysis is then known without the analyzer: the exact term is the chunk in lower
 * case and its stem, unless it is digits or a stopword, "~" + stem(exact), both spanning the whole
 * chunk (what the analyzer's cache holds for it, too). *digits: whether it is digits. */
static int is_plain(const unsigned char *s, Py_ssize_t n, int *digits_out)
{
    if (n >= 16)
        return 0;
    int digits = 1, lower_rest = 1, upper = 1, lower = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        int is_lower = c >= 'a' && c <= 'z', is_upper = c >= 'A' && c <= 'Z', is_digit = c >= '0' && c <= '9';
        if (!is_lower && !is_upper && !is_digit)
            return 0;
        digits &= is_digit;
        lower &= is_lower;
        upper &= is_upper;
        if (i > 0)
            lower_rest &= is_lower;
    }
    if (!digits && !lower && !upper && !(n >= 2 && lower_rest))
        return 0; /* letters and digits mixed, or an inner case change */
    *digits_out = digits;
    return 1;
}

/* Whether the n bytes at a begin with the len bytes of b (probes and words are short: no library call). */
static inline int starts_with(const unsigned char *a, Py_ssize_t n, const unsigned char *b, Py_ssize_t len)
{
    if (len > n)
        return 0;
    Py_ssize_t k = 0;
    while (k < len && a[k] == b[k])
        k++;
    return k == len;
}

/* Whether the n bytes at a hold the len bytes of b anywhere. */
static inline int holds_probe(const unsigned char *a, Py_ssize_t n, const unsigned char *b, Py_ssize_t len)
{
    for (Py_ssize_t i = 0; i + len <= n; i++)
        if (a[i] == b[0] && starts_with(a + i, n - i, b, len))
            return 1;
    return 0;
}

/* Append the wanted spans of a plain chunk (is_plain), its exact term made from the lower-case
 * text; 0, or -1 with an exception set. With hints (stem_probes and exact_terms not NULL: the
 * wanted stems' probes, and every other wanted ASCII term) no term is made that is not wanted:
 * the exact term is looked for among exact_terms, and the word is stemmed only when it holds a
 * wanted stem's probe (every ASCII source of a stem holds its probe). */
static int plain_spans(const unsigned char *lowered, Py_ssize_t start, Py_ssize_t end, int digits, PyObject *wanted,
                       PyObject *stem, PyObject *stopwords, PyObject *stem_probes, PyObject *exact_terms,
                       PyObject *stem_cache, engram_spans *out)
{
    int status = -1, found;
    PyObject *exact;
    if (stem_probes != NULL && exact_terms != NULL) {
        size_t len = (size_t)(end - start);
        for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(exact_terms); t++) {
            PyObject *term = PyTuple_GET_ITEM(exact_terms, t);
            if ((size_t)PyUnicode_GET_LENGTH(term) == len && memcmp(PyUnicode_1BYTE_DATA(term), lowered + start, len) == 0) {
                if (engram_spans_push(out, start, end, term) < 0)
                    return -1;
                break;
            }
        }
        if (digits)
            return 0;
        int any = 0;
        for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(stem_probes) && !any; p++) {
            PyObject *probe = PyTuple_GET_ITEM(stem_probes, p);
            any = holds_probe(lowered + start, (Py_ssize_t)len, PyUnicode_1BYTE_DATA(probe), PyUnicode_GET_LENGTH(probe));
        }
        if (!any)
            return 0;
        if ((exact = PyUnicode_FromStringAndSize((const char *)lowered + start, end - start)) == NULL)
            return -1;
    } else {
        if ((exact = PyUnicode_FromStringAndSize((const char *)lowered + start, end - start)) == NULL)
            return -1;
        found = PySet_Contains(wanted, exact);
        if (found < 0 || (found && engram_spans_push(out, start, end, exact) < 0))
            goto done;
    }
    if (!digits) {
        int stop = PySet_Contains(stopwords, exact);
        if (stop < 0)
            goto done;
        if (!stop) {
            /* stem(exact) answers from the analyzer's cache when it holds the word: read it here. */
            PyObject *stemmed = stem_cache != NULL ? PyDict_GetItemWithError(stem_cache, exact) : NULL;
            if (stemmed != NULL)
                Py_INCREF(stemmed);
            else if (PyErr_Occurred() || (stemmed = PyObject_CallOneArg(stem, exact)) == NULL)
                goto done;
            if (!PyUnicode_Check(stemmed)) {
                Py_DECREF(stemmed);
                PyErr_SetString(PyExc_TypeError, "stem() must give a str");
                goto done;
            }
            PyObject *term = PyUnicode_Concat(tilde, stemmed);
            Py_DECREF(stemmed);
            if (term == NULL)
                goto done;
            if (PyUnicode_GET_LENGTH(term) > 64) { /* analyzer.MAX_TERM_CHARS */
                PyObject *cut = PyUnicode_Substring(term, 0, 64);
                Py_DECREF(term);
                if ((term = cut) == NULL)
                    goto done;
            }
            found = PySet_Contains(wanted, term);
            if (found < 0 || (found && engram_spans_push(out, start, end, term) < 0)) {
                Py_DECREF(term);
                goto done;
            }
            Py_DECREF(term);
        }
    }
    status = 0;
done:
    Py_DECREF(exact);
    return status;
}

/* Append a chunk's wanted tokens to out; -1 with an exception set on failure. A plain chunk is
 * analyzed here (no substring, no cache lookup); any other from the analyzer's cache, or by the
 * analyzer, called back. */
static int chunk_spans(PyObject *text, const unsigned char *lowered, Py_ssize_t start, Py_ssize_t end,
                       PyObject *wanted, PyObject *cache, PyObject *analyze, PyObject *stem, PyObject *stopwords,
                       PyObject *stem_probes, PyObject *exact_terms, PyObject *stem_cache, engram_spans *out)
{
    int digits = 0;
    if (is_plain(PyUnicode_1BYTE_DATA(text) + start, end - start, &digits))
        return plain_spans(lowered, start, end, digits, wanted, stem, stopwords, stem_probes, exact_terms, stem_cache,
                           out);
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
        if (engram_spans_push(out, start + a, start + b, term) < 0)
            goto done;
    }
    status = 0;
done:
    Py_DECREF(analysis);
    return status;
}

/* Whether every item of a tuple is a non-empty ASCII str; else ValueError. */
static int check_probes(PyObject *probes)
{
    for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(probes); p++) {
        PyObject *probe = PyTuple_GET_ITEM(probes, p);
        if (!PyUnicode_Check(probe) || !PyUnicode_IS_ASCII(probe) || PyUnicode_GET_LENGTH(probe) == 0) {
            PyErr_SetString(PyExc_ValueError, "probes must be non-empty ASCII str");
            return -1;
        }
    }
    return 0;
}

int engram_find_ascii_spans(PyObject *text, PyObject *wanted, PyObject *probes, PyObject *cache, PyObject *analyze,
                            PyObject *stem, PyObject *stopwords, PyObject *stem_probes, PyObject *exact_terms,
                            PyObject *stem_cache, engram_spans *out)
{
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "text must be ASCII");
        return -1;
    }
    if (tilde == NULL && (tilde = PyUnicode_InternFromString("~")) == NULL)
        return -1;
    Py_ssize_t np = PyTuple_GET_SIZE(probes);
    if (check_probes(probes) < 0 || (stem_probes != NULL && check_probes(stem_probes) < 0)
        || (exact_terms != NULL && check_probes(exact_terms) < 0))
        return -1;
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n == 0 || np == 0)
        return 0;
    /* The lower-case text (a probe may reach past its chunk), and the probes by their first byte. */
    int status = 0;
    unsigned char *lowered = PyMem_Malloc((size_t)n + 1);
    const unsigned char **needles = PyMem_Malloc((size_t)np * sizeof(*needles));
    Py_ssize_t *lengths = PyMem_Malloc((size_t)np * sizeof(Py_ssize_t));
    Py_ssize_t *next = PyMem_Malloc((size_t)np * sizeof(Py_ssize_t));
    if (lowered == NULL || needles == NULL || lengths == NULL || next == NULL) {
        PyErr_NoMemory();
        status = -1;
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        lowered[i] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
    }
    lowered[n] = 0;
    /* head[c]: the first probe starting with byte c (-1: none), next[p] the one after p. */
    Py_ssize_t head[256];
    for (int c = 0; c < 256; c++)
        head[c] = -1;
    for (Py_ssize_t p = np; p-- > 0;) {
        PyObject *probe = PyTuple_GET_ITEM(probes, p);
        needles[p] = PyUnicode_1BYTE_DATA(probe);
        lengths[p] = PyUnicode_GET_LENGTH(probe);
        next[p] = head[needles[p][0]];
        head[needles[p][0]] = p;
    }
    /* Each chunk in order, looked at when a probe starts inside it (the probes' occurrences in
     * the lower-case text, as a search for each would find them). */
    for (Py_ssize_t i = 0; i < n && status == 0;) {
        if (!is_word(s[i])) {
            i++;
            continue;
        }
        Py_ssize_t end = chunk_end(s, n, i);
        int hit = 0;
        for (Py_ssize_t pos = i; pos < end && !hit; pos++) {
            for (Py_ssize_t p = head[lowered[pos]]; p >= 0 && !hit; p = next[p])
                hit = starts_with(lowered + pos, n - pos, needles[p], lengths[p]);
        }
        if (hit && chunk_spans(text, lowered, i, end, wanted, cache, analyze, stem, stopwords, stem_probes, exact_terms,
                               stem_cache, out) < 0)
            status = -1;
        i = end;
    }
done:
    PyMem_Free(lowered);
    PyMem_Free(needles);
    PyMem_Free(lengths);
    PyMem_Free(next);
    return status;
}

PyObject *engram_ascii_spans(PyObject *self, PyObject *args)
{
    PyObject *text, *wanted, *probes, *cache, *analyze, *stem, *stopwords;
    if (!PyArg_ParseTuple(args, "UO!O!O!OOO:ascii_spans", &text, &PySet_Type, &wanted, &PyTuple_Type, &probes,
                          &PyDict_Type, &cache, &analyze, &stem, &stopwords))
        return NULL;
    engram_spans spans = {NULL, 0, 0};
    PyObject *out = NULL;
    if (engram_find_ascii_spans(text, wanted, probes, cache, analyze, stem, stopwords, NULL, NULL, NULL, &spans) < 0)
        goto done;
    if ((out = PyList_New(spans.n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < spans.n; i++) {
        PyObject *span = Py_BuildValue("(nnO)", spans.items[i].start, spans.items[i].end, spans.items[i].term);
        if (span == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, span);
    }
done:
    engram_spans_clear(&spans);
    return out;
}
