/* A hit's whole explanation for an ASCII text in one call (a module function of _kernels,
 * registered in _kernels.c).
 *
 * Why: once the terms' spans were found in C (_kernels_terms.c), what was left of an explanation
 * was Python glue per hit: a set of the found terms, the matched terms per query word and field,
 * the snippet's field, its spans, window, ellipses, merged highlights and byte ranges, and a
 * tuple per span handed between them, about as much again as the finding (docs/design/engine.md,
 * "Explanations"). Here the spans stay in a C array and explain.Explainer.match_terms and
 * explain.snippet are computed from them as the Python computes them (the Python stays the
 * reference and the path for other texts; tests/engine/test_explain_native.py compares the two).
 * One scalar path: nothing to twin.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_kernels.h"

const char engram_ascii_explain_doc[] =
"ascii_explain(text, wanted, probes, cache, analyze, stem, stopwords, stem_probes, exact_terms,\n"
"              stem_cache, words, others, tags, source, made, match_type, snippet_type, max_chars)\n"
"-> (matches, snippet or None)\n--\n\n"
"explain.Explainer.explain for an ASCII text: the terms found as ascii_spans finds them (text to\n"
"stopwords are its arguments; stem_probes, the wanted stems' probes alone, and exact_terms, every\n"
"other wanted ASCII term: a plain word holding no stem's probe is not stemmed; stem_cache, the\n"
"dict stem answers from, read first); words, the query's content words as (exact, stem or None, parts)\n"
"tuples; others(tags, source), called only when a word's exact form is not in the text, gives\n"
"(whole tags, the tags' terms, the source's terms: the wanted ones at least) as sets; made caches each\n"
"(term, kind, field) key's match_type(term, kind, field). The snippet is snippet_type(field, text,\n"
"highlights), or None when the best field is not the text (explain.snippet makes that one).";

/* The kinds and fields of a match, and the snippet's ellipsis, made once. */
static PyObject *s_exact, *s_stem, *s_part, *s_text, *s_tags, *s_source, *s_ellipsis, *s_empty;

int engram_intern_names(void)
{
    if (s_empty != NULL)
        return 0;
    const char *names[8] = {"exact", "stem", "part", "text", "tags", "source", "\xe2\x80\xa6", ""};
    PyObject **slots[8] = {&s_exact, &s_stem, &s_part, &s_text, &s_tags, &s_source, &s_ellipsis, &s_empty};
    for (int i = 0; i < 8; i++)
        if ((*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    return 0;
}

/* One matched (term, kind, field), its objects borrowed (the term from words, the rest interned). */
typedef struct {
    PyObject *term, *kind, *field;
} Key;

typedef struct {
    Key *items;
    Py_ssize_t n;
} Keys;

/* Add a key unless an equal one is there (the Python's dict keeps the first place); -1 on error. */
static int add_key(Keys *keys, PyObject *term, PyObject *kind, PyObject *field)
{
    for (Py_ssize_t i = 0; i < keys->n; i++) {
        if (keys->items[i].kind != kind || keys->items[i].field != field)
            continue;
        int same = PyObject_RichCompareBool(keys->items[i].term, term, Py_EQ);
        if (same < 0)
            return -1;
        if (same)
            return 0;
    }
    keys->items[keys->n++] = (Key){term, kind, field};
    return 0;
}

/* Whether a set holds an object; -1 on error. */
static inline int holds(PyObject *set, PyObject *item)
{
    return PySet_Contains(set, item);
}

/* The (whole tags, tags' terms, source's terms) of the hit, asked of others once; -1 on error. */
static int other_sets(PyObject *others, PyObject *tags, PyObject *source, PyObject **got, PyObject **sets)
{
    if (*got != NULL)
        return 0;
    PyObject *found = PyObject_CallFunctionObjArgs(others, tags, source, NULL);
    if (found == NULL)
        return -1;
    if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 3 || !PyAnySet_Check(PyTuple_GET_ITEM(found, 0))
        || !PyAnySet_Check(PyTuple_GET_ITEM(found, 1)) || !PyAnySet_Check(PyTuple_GET_ITEM(found, 2))) {
        Py_DECREF(found);
        PyErr_SetString(PyExc_TypeError, "others() must give three sets");
        return -1;
    }
    for (int i = 0; i < 3; i++)
        sets[i] = PyTuple_GET_ITEM(found, i);
    *got = found;
    return 0;
}

/* explain.Explainer.match_terms over the text's found terms (a set): the keys in order; -1 on error. */
static int match_keys(PyObject *words, PyObject *in_text, PyObject *others, PyObject *tags, PyObject *source,
                      Keys *keys)
{
    PyObject *got = NULL, *sets[3] = {NULL, NULL, NULL};
    int status = -1;
    for (Py_ssize_t w = 0; w < PyTuple_GET_SIZE(words); w++) {
        PyObject *word = PyTuple_GET_ITEM(words, w);
        PyObject *exact = PyTuple_GET_ITEM(word, 0), *stem = PyTuple_GET_ITEM(word, 1), *parts = PyTuple_GET_ITEM(word, 2);
        int has_stem = stem != Py_None, r;
        /* The best kind over all fields wins; among fields holding it, the first (text, tags, source). */
        if ((r = holds(in_text, exact)) != 0) {
            if (r < 0 || add_key(keys, exact, s_exact, s_text) < 0)
                goto done;
            continue;
        }
        if (other_sets(others, tags, source, &got, sets) < 0)
            goto done;
        PyObject *whole = sets[0], *in_tags = sets[1], *in_source = sets[2];
        int a, c;
        if ((a = holds(whole, exact)) < 0 || (!a && (a = holds(in_tags, exact)) < 0))
            goto done;
        if (a) {
            if (add_key(keys, exact, s_exact, s_tags) < 0)
                goto done;
            continue;
        }
        if ((c = holds(in_source, exact)) < 0)
            goto done;
        if (c) {
            if (add_key(keys, exact, s_exact, s_source) < 0)
                goto done;
            continue;
        }
        if (has_stem) {
            PyObject *fields[3] = {s_text, s_tags, s_source}, *in[3] = {in_text, in_tags, in_source};
            int placed = 0;
            for (int f = 0; f < 3 && !placed; f++) {
                if ((r = holds(in[f], stem)) < 0)
                    goto done;
                if (r) {
                    if (add_key(keys, stem, s_stem, fields[f]) < 0)
                        goto done;
                    placed = 1;
                }
            }
            if (placed)
                continue;
        }
        for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(parts); p++) {
            PyObject *part = PyTuple_GET_ITEM(parts, p);
            PyObject *fields[3] = {s_text, s_tags, s_source}, *in[3] = {in_text, in_tags, in_source};
            for (int f = 0; f < 3; f++) {
                if ((r = holds(in[f], part)) < 0)
                    goto done;
                if (r) {
                    if (add_key(keys, part, s_part, fields[f]) < 0)
                        goto done;
                    break;
                }
            }
        }
    }
    status = 0;
done:
    Py_XDECREF(got);
    return status;
}

/* The snippet text: body[start:end], with the ellipsis before and after where cut. */
static PyObject *cut_text(PyObject *body, Py_ssize_t start, Py_ssize_t end, int prefix, int suffix)
{
    if (!prefix && !suffix)
        return PyUnicode_Substring(body, start, end);
    if (!PyUnicode_IS_ASCII(body)) { /* any other text: the slice, then the ellipses around it */
        PyObject *cut = PyUnicode_Substring(body, start, end), *out = NULL;
        if (cut == NULL)
            return NULL;
        PyObject *parts = PyTuple_Pack(3, prefix ? s_ellipsis : s_empty, cut, suffix ? s_ellipsis : s_empty);
        Py_DECREF(cut);
        if (parts != NULL)
            out = PyUnicode_Join(s_empty, parts);
        Py_XDECREF(parts);
        return out;
    }
    Py_ssize_t len = end - start + prefix + suffix;
    PyObject *out = PyUnicode_New(len, 0xFFFF);
    if (out == NULL)
        return NULL;
    const unsigned char *s = PyUnicode_1BYTE_DATA(body);
    Py_UCS2 *d = PyUnicode_2BYTE_DATA(out);
    Py_ssize_t k = 0;
    if (prefix)
        d[k++] = 0x2026; /* … */
    for (Py_ssize_t i = start; i < end; i++)
        d[k++] = s[i];
    if (suffix)
        d[k++] = 0x2026;
    return out;
}

/* explain._head: the text's start, cut at a word boundary near max_chars, … when cut (is_mark:
 * explain._is_mark, for a text that is not ASCII). */
static PyObject *head(PyObject *text, Py_ssize_t max_chars, PyObject *is_mark)
{
    Py_ssize_t length = PyUnicode_GET_LENGTH(text), end;
    if (length <= max_chars)
        return Py_NewRef(text);
    if (PyUnicode_IS_ASCII(text))
        end = engram_snap_end(PyUnicode_1BYTE_DATA(text), length, max_chars, max_chars / 2);
    else if (engram_snap_end_any(text, max_chars, max_chars / 2, is_mark, &end) < 0)
        return NULL;
    return cut_text(text, 0, end, 0, 1);
}

/* The UTF-8 bytes of text[a:b] (a lone surrogate counts 3, as explain._byte_ranges counts it). */
static Py_ssize_t utf8_size(int kind, const void *d, Py_ssize_t a, Py_ssize_t b)
{
    Py_ssize_t size = 0;
    for (Py_ssize_t i = a; i < b; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, d, i);
        size += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    return size;
}

/* snippet_type(field, text, highlights). A dataclass of slots without __post_init__ (the engine's
 * frozen Snippet) has its three fields set here as its generated __init__ sets them (object's own
 * setattr), without the Python call: that call was a tenth of an ASCII hit's explanation. */
static PyObject *s_field_name, *s_text_name, *s_highlights_name, *fast_type;

static PyObject *make_snippet(PyObject *type, PyObject *field, PyObject *body, PyObject *highlights)
{
    if (type != fast_type) {
        int fast = 0;
        if (s_field_name == NULL && ((s_field_name = PyUnicode_InternFromString("field")) == NULL
                                     || (s_text_name = PyUnicode_InternFromString("text")) == NULL
                                     || (s_highlights_name = PyUnicode_InternFromString("highlights")) == NULL))
            return NULL;
        if (PyType_Check(type) && ((PyTypeObject *)type)->tp_dictoffset == 0) {
            PyObject *dict = ((PyTypeObject *)type)->tp_dict;
            fast = PyDict_GetItemString(dict, "__dataclass_fields__") != NULL
                   && PyDict_GetItemString(dict, "__post_init__") == NULL && !PyObject_HasAttrString(type, "__post_init__");
        }
        if (!fast)
            return PyObject_CallFunctionObjArgs(type, field, body, highlights, NULL);
        Py_XSETREF(fast_type, Py_NewRef(type));
    }
    PyTypeObject *t = (PyTypeObject *)type;
    PyObject *obj = t->tp_alloc(t, 0);
    if (obj == NULL)
        return NULL;
    if (PyObject_GenericSetAttr(obj, s_field_name, field) < 0 || PyObject_GenericSetAttr(obj, s_text_name, body) < 0
        || PyObject_GenericSetAttr(obj, s_highlights_name, highlights) < 0)
        Py_CLEAR(obj);
    return obj;
}

/* explain.snippet of the text field: the window over the spans of the keys' text terms, its
 * merged highlights as byte ranges (one byte a character), made with snippet_type. */
static PyObject *text_snippet(PyObject *text, const engram_spans *spans, const Keys *keys, PyObject *snippet_type,
                              Py_ssize_t max_chars, PyObject *is_mark)
{
    Py_ssize_t n = spans->n, length = PyUnicode_GET_LENGTH(text);
    Py_ssize_t *bounds = PyMem_Malloc(((size_t)n + 1) * 2 * sizeof(Py_ssize_t));
    Py_ssize_t *ids = PyMem_Malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *counts = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    PyObject **terms = PyMem_Malloc(((size_t)n + 1) * sizeof(PyObject *));
    PyObject *body = NULL, *highlights = NULL, *result = NULL;
    if (bounds == NULL || ids == NULL || counts == NULL || terms == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* The spans whose term is a text match's (in order), each numbered by its distinct term. */
    Py_ssize_t kept = 0, distinct = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *term = spans->items[i].term;
        int wanted = 0;
        for (Py_ssize_t m = 0; m < keys->n && !wanted; m++) {
            if (keys->items[m].field != s_text)
                continue;
            if ((wanted = PyObject_RichCompareBool(keys->items[m].term, term, Py_EQ)) < 0)
                goto done;
        }
        if (!wanted)
            continue;
        Py_ssize_t id = engram_term_id(terms, &distinct, term);
        if (id < 0)
            goto done;
        bounds[2 * kept] = spans->items[i].start;
        bounds[2 * kept + 1] = spans->items[i].end;
        ids[kept++] = id;
    }
    if (kept == 0) {
        if ((body = head(text, max_chars, is_mark)) != NULL && (highlights = PyTuple_New(0)) != NULL)
            result = make_snippet(snippet_type, s_text, body, highlights);
        goto done;
    }
    Py_ssize_t start = 0, end = length;
    int ascii = PyUnicode_IS_ASCII(text);
    if (length > max_chars) {
        if (ascii)
            engram_window(PyUnicode_1BYTE_DATA(text), length, bounds, ids, kept, max_chars, counts, &start, &end);
        else if (engram_window_any(text, bounds, ids, kept, max_chars, counts, is_mark, &start, &end) < 0)
            goto done;
    }
    int prefix = start > 0, suffix = end < length;
    /* A word longer than the window (or cut at its edge) is highlighted as far as it shows; the
     * ranges sorted (insertion: a few) and the overlapping ones merged, as explain._merge does. */
    Py_ssize_t inside = 0;
    for (Py_ssize_t i = 0; i < kept; i++) {
        Py_ssize_t a = bounds[2 * i], b = bounds[2 * i + 1];
        if (!(a < end && b > start))
            continue;
        a = a > start ? a : start;
        b = b < end ? b : end;
        Py_ssize_t j = inside++;
        for (; j > 0 && (bounds[2 * (j - 1)] > a || (bounds[2 * (j - 1)] == a && bounds[2 * (j - 1) + 1] > b)); j--) {
            bounds[2 * j] = bounds[2 * (j - 1)];
            bounds[2 * j + 1] = bounds[2 * (j - 1) + 1];
        }
        bounds[2 * j] = a;
        bounds[2 * j + 1] = b;
    }
    Py_ssize_t merged = 0;
    for (Py_ssize_t i = 0; i < inside; i++) {
        Py_ssize_t a = bounds[2 * i], b = bounds[2 * i + 1];
        if (merged > 0 && a < bounds[2 * (merged - 1) + 1]) {
            if (b > bounds[2 * (merged - 1) + 1])
                bounds[2 * (merged - 1) + 1] = b;
        } else {
            bounds[2 * merged] = a;
            bounds[2 * merged + 1] = b;
            merged++;
        }
    }
    Py_ssize_t offset = (prefix ? 3 : 0) - start; /* the ellipsis is 3 UTF-8 bytes */
    if (!ascii) { /* character ranges to byte ranges, counted from the window's start */
        int kind = PyUnicode_KIND(text);
        const void *d = PyUnicode_DATA(text);
        Py_ssize_t at = start, byte = prefix ? 3 : 0;
        for (Py_ssize_t i = 0; i < merged; i++) {
            Py_ssize_t a = bounds[2 * i], b = bounds[2 * i + 1];
            byte += utf8_size(kind, d, at, a);
            Py_ssize_t size = utf8_size(kind, d, a, b);
            bounds[2 * i] = byte;
            bounds[2 * i + 1] = byte + size;
            at = b;
            byte += size;
        }
        offset = 0;
    }
    if ((highlights = PyTuple_New(merged)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < merged; i++) {
        PyObject *range = Py_BuildValue("(nn)", bounds[2 * i] + offset, bounds[2 * i + 1] + offset);
        if (range == NULL)
            goto done;
        PyTuple_SET_ITEM(highlights, i, range);
    }
    if ((body = cut_text(text, start, end, prefix, suffix)) != NULL)
        result = make_snippet(snippet_type, s_text, body, highlights);
done:
    Py_XDECREF(body);
    Py_XDECREF(highlights);
    PyMem_Free(bounds);
    PyMem_Free(ids);
    PyMem_Free(counts);
    PyMem_Free(terms);
    return result;
}

/* The matches of the keys, each made once through the made cache: a tuple; NULL on error. */
static PyObject *matches_of(const Keys *keys, PyObject *made, PyObject *match_type)
{
    PyObject *out = PyTuple_New(keys->n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < keys->n; i++) {
        PyObject *key = PyTuple_Pack(3, keys->items[i].term, keys->items[i].kind, keys->items[i].field);
        if (key == NULL)
            goto fail;
        PyObject *match = PyDict_GetItemWithError(made, key); /* borrowed */
        if (match != NULL)
            Py_INCREF(match);
        else if (!PyErr_Occurred() && (match = PyObject_Call(match_type, key, NULL)) != NULL
                 && PyDict_SetItem(made, key, match) < 0)
            Py_CLEAR(match);
        Py_DECREF(key);
        if (match == NULL)
            goto fail;
        PyTuple_SET_ITEM(out, i, match);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* Check the words' shape, (exact, stem or None, parts) each, and count their alternatives into *most. */
int engram_check_words(PyObject *words, Py_ssize_t *most)
{
    for (Py_ssize_t w = 0; w < PyTuple_GET_SIZE(words); w++) {
        PyObject *word = PyTuple_GET_ITEM(words, w);
        if (!PyTuple_Check(word) || PyTuple_GET_SIZE(word) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(word, 0))
            || (PyTuple_GET_ITEM(word, 1) != Py_None && !PyUnicode_Check(PyTuple_GET_ITEM(word, 1)))
            || !PyTuple_Check(PyTuple_GET_ITEM(word, 2))) {
            PyErr_SetString(PyExc_TypeError, "a word must be (exact, stem or None, parts)");
            return -1;
        }
        *most += 1 + PyTuple_GET_SIZE(PyTuple_GET_ITEM(word, 2));
    }
    return 0;
}

/* The matches and the text's snippet (None when the best field is another) from a text's spans,
 * as explain.Explainer.explain makes them; is_mark as head() takes it. NULL on error. */
PyObject *engram_explain_spans(PyObject *text, const engram_spans *spans, PyObject *words, PyObject *others,
                               PyObject *tags, PyObject *source, PyObject *made, PyObject *match_type,
                               PyObject *snippet_type, Py_ssize_t max_chars, PyObject *is_mark, Py_ssize_t most)
{
    Keys keys = {PyMem_Malloc(((size_t)most + 1) * sizeof(Key)), 0};
    PyObject *in_text = NULL, *matches = NULL, *snip = NULL, *result = NULL;
    if (keys.items == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (PyTuple_GET_SIZE(words) > 0) {
        if ((in_text = PySet_New(NULL)) == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < spans->n; i++)
            if (PySet_Add(in_text, spans->items[i].term) < 0)
                goto done;
        if (match_keys(words, in_text, others, tags, source, &keys) < 0)
            goto done;
    }
    if ((matches = matches_of(&keys, made, match_type)) == NULL)
        goto done;
    int in_field_text = 0;
    for (Py_ssize_t m = 0; m < keys.n; m++)
        in_field_text |= keys.items[m].field == s_text;
    if (keys.n == 0) {
        PyObject *body = head(text, max_chars, is_mark), *none = body != NULL ? PyTuple_New(0) : NULL;
        if (none != NULL)
            snip = make_snippet(snippet_type, s_text, body, none);
        Py_XDECREF(body);
        Py_XDECREF(none);
    } else if (in_field_text)
        snip = text_snippet(text, spans, &keys, snippet_type, max_chars, is_mark);
    else
        snip = Py_NewRef(Py_None); /* the tags' or the source's: explain.snippet makes it */
    if (snip != NULL)
        result = PyTuple_Pack(2, matches, snip);
done:
    Py_XDECREF(in_text);
    Py_XDECREF(matches);
    Py_XDECREF(snip);
    PyMem_Free(keys.items);
    return result;
}

PyObject *engram_ascii_explain(PyObject *self, PyObject *args)
{
    PyObject *text, *wanted, *probes, *cache, *analyze, *stem, *stopwords, *stem_probes, *exact_terms, *stem_cache;
    PyObject *words, *others, *tags;
    PyObject *source, *made;
    PyObject *match_type, *snippet_type;
    Py_ssize_t max_chars;
    if (!PyArg_ParseTuple(args, "UO!O!O!OOOO!O!O!O!OOOO!OOn:ascii_explain", &text, &PySet_Type, &wanted,
                          &PyTuple_Type, &probes, &PyDict_Type, &cache, &analyze, &stem, &stopwords, &PyTuple_Type,
                          &stem_probes, &PyTuple_Type, &exact_terms, &PyDict_Type, &stem_cache, &PyTuple_Type, &words, &others, &tags, &source, &PyDict_Type, &made, &match_type,
                          &snippet_type, &max_chars))
        return NULL;
    if (max_chars <= 0) {
        PyErr_SetString(PyExc_ValueError, "max_chars must be positive");
        return NULL;
    }
    Py_ssize_t most = 0;
    if (engram_check_words(words, &most) < 0 || engram_intern_names() < 0)
        return NULL;
    engram_spans spans = {NULL, 0, 0};
    PyObject *result = NULL;
    if (engram_find_ascii_spans(text, wanted, probes, cache, analyze, stem, stopwords, stem_probes, exact_terms, stem_cache,
                                &spans) == 0)
        result = engram_explain_spans(text, &spans, words, others, tags, source, made, match_type, snippet_type, max_chars,
                               NULL, most);
    engram_spans_clear(&spans);
    return result;
}

const char engram_match_terms_doc[] =
"match_terms(words, in_text, others, tags, source, made, match_type) -> tuple\n--\n\n"
"explain.Explainer.match_terms over the wanted terms found in a text (in_text, a set), for a text of\n"
"any script: words, others, tags, source, made and match_type as ascii_explain takes them.";

PyObject *engram_match_terms(PyObject *self, PyObject *args)
{
    PyObject *words, *in_text, *others, *tags, *source, *made, *match_type;
    if (!PyArg_ParseTuple(args, "O!O!OOOO!O:match_terms", &PyTuple_Type, &words, &PySet_Type, &in_text, &others, &tags,
                          &source, &PyDict_Type, &made, &match_type))
        return NULL;
    Py_ssize_t most = 0;
    if (engram_check_words(words, &most) < 0 || engram_intern_names() < 0)
        return NULL;
    Keys keys = {PyMem_Malloc(((size_t)most + 1) * sizeof(Key)), 0};
    PyObject *result = NULL;
    if (keys.items == NULL)
        PyErr_NoMemory();
    else if (match_keys(words, in_text, others, tags, source, &keys) == 0)
        result = matches_of(&keys, made, match_type);
    PyMem_Free(keys.items);
    return result;
}
