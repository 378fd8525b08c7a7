/* Which query words the term counts' rows hold (a module function of _kernels, registered in _kernels.c).
 *
 * Why: a v5 search judges each candidate's keyword coverage by the words it, or the turn before it,
 * holds. Worked out as BM25 parts (bm25_parts) turned into presences and multiplied by each word's
 * term columns, with the turn before's rows concatenated and OR-ed in afterwards, that took some
 * twenty array steps and about 100 us a collection a search (docs/design/engine.md). Here a row's
 * terms mark their words directly, the row beside it in the same pass. One scalar loop: nothing
 * to twin.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_kernels.h"

const char engram_word_presence_doc[] =
"word_presence(ords, prev, starts, lengths, ids, qids, term_whole, term_part, table, whole, part)\n--\n\n"
"Mark in whole and part (bool, ordinals x words, zeroed) the words each ordinal's row holds, and\n"
"those of the row at prev beside it (int64, one per ordinal, or none at all): a row holding query\n"
"term q (term id qids[q], int64) holds word j whole where term_whole[q, j], in part where\n"
"term_part[q, j] (bool, terms x words). Ordinal o's row is ids[starts[o] : starts[o] + lengths[o]]\n"
"(uint32 term ids; lengths int32, negative: no row; starts int64); an ordinal outside the counts\n"
"(-1 among them) holds nothing. table (int32, zero, one slot per term id, left zero) is scratch.";

/* OR a query term's words into an ordinal's: `from` (words bytes) into `into`. */
static inline void mark(uint8_t *into, const uint8_t *from, Py_ssize_t words)
{
    for (Py_ssize_t j = 0; j < words; j++)
        into[j] |= from[j];
}

/* What a pass over the term counts' rows reads, and which words each numbered query term holds. */
typedef struct {
    Py_ssize_t docs, arena, vocab;
    const int64_t *starts;
    const int32_t *lengths;
    const uint32_t *ids;
    const int32_t *table;  /* query term number + 1 by term id (engram_number_terms), 0: none */
    const uint8_t *term_whole, *term_part;
    Py_ssize_t words;
} Rows;

/* OR into `whole` and `part` (words bytes each) the words ordinal o's row holds, and the row at `beside`'s
 * (-1: none); -1 when a row lies outside the arena, else 0. */
static int mark_words(const Rows *r, int64_t o, int64_t beside, uint8_t *whole, uint8_t *part)
{
    for (int side = 0; side < (beside >= 0 ? 2 : 1); side++) {
        int64_t start = 0, stop = 0;
        if (engram_row_bounds(side ? beside : o, r->docs, r->lengths, r->starts, r->arena, &start, &stop) < 0)
            return -1;
        for (int64_t e = start; e < stop; e++) {  /* (none when the ordinal has no row) */
            uint32_t id = r->ids[e];
            int32_t hit = id < (uint32_t)r->vocab ? r->table[id] : 0;
            if (hit) {
                mark(whole, r->term_whole + (Py_ssize_t)(hit - 1) * r->words, r->words);
                mark(part, r->term_part + (Py_ssize_t)(hit - 1) * r->words, r->words);
            }
        }
    }
    return 0;
}

/* Check the arguments word_presence and word_coverage share (v[0] to v[5] and v[8]: ords, prev, starts, lengths,
 * ids, qids and table; the term matrices and outputs are the caller's): 0, or -1 with an error set. */
static int check_row_args(const Py_buffer *v)
{
    Py_ssize_t m = v[0].len / 8, docs = v[2].len / 8, t = v[5].len / 8, vocab = v[8].len / 4;
    if (engram_check_array(&v[0], 8, "ql", -1, "ords") < 0 || engram_check_array(&v[1], 8, "ql", -1, "prev") < 0
        || engram_check_array(&v[2], 8, "ql", -1, "starts") < 0 || engram_check_array(&v[3], 4, "i", docs, "lengths") < 0
        || engram_check_array(&v[4], 4, "I", -1, "ids") < 0 || engram_check_array(&v[5], 8, "ql", -1, "qids") < 0
        || engram_check_array(&v[8], 4, "i", -1, "table") < 0)
        return -1;
    Py_ssize_t n_prev = v[1].len / 8;
    if (n_prev != 0 && n_prev != m) {
        PyErr_Format(PyExc_ValueError, "prev holds %zd ordinals, not none or one per ordinal (%zd)", n_prev, m);
        return -1;
    }
    const int64_t *qids = v[5].buf;
    for (Py_ssize_t q = 0; q < t; q++) {
        if (qids[q] < 0 || qids[q] >= vocab) {
            PyErr_Format(PyExc_ValueError, "query term %zd: id %lld outside the table", q, (long long)qids[q]);
            return -1;
        }
    }
    return 0;
}

PyObject *engram_word_presence(PyObject *self, PyObject *args)
{
    PyObject *objs[11];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOO:word_presence", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6], &objs[7], &objs[8], &objs[9], &objs[10]))
        return NULL;
    static const char *names[11] = {"ords", "prev", "starts", "lengths", "ids", "qids", "term_whole", "term_part",
                                    "table", "whole", "part"};
    Py_buffer v[11];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    if (engram_get_buffers(objs, v, 11, 8, names) < 0)
        goto done;
    Py_ssize_t m = v[0].len / 8, docs = v[2].len / 8, arena = v[4].len / 4, t = v[5].len / 8;
    Py_ssize_t vocab = v[8].len / 4;
    if (check_row_args(v) < 0 || engram_check_array(&v[6], 1, "?B", -1, "term_whole") < 0
        || engram_check_array(&v[7], 1, "?B", -1, "term_part") < 0 || engram_check_array(&v[9], 1, "?B", -1, "whole") < 0
        || engram_check_array(&v[10], 1, "?B", v[9].len, "part") < 0)
        goto done;
    Py_ssize_t n_prev = v[1].len / 8;
    if (t == 0) {  /* no query term: nothing is held (whole and part stay as they are, zero) */
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t words = v[6].len / t;
    if (words * t != v[6].len) {
        PyErr_Format(PyExc_ValueError, "term_whole is not one row of words per term (%zd terms)", t);
        goto done;
    }
    if (v[7].len != v[6].len) {
        PyErr_Format(PyExc_ValueError, "term_part is not one row of words per term (%zd terms)", t);
        goto done;
    }
    if (v[9].len != m * words) {
        PyErr_Format(PyExc_ValueError, "whole is not one row of words per ordinal (%zd ordinals)", m);
        goto done;
    }
    const int64_t *qids = v[5].buf;
    const int64_t *ords = v[0].buf, *prev = n_prev ? v[1].buf : NULL, *starts = v[2].buf;
    const int32_t *lengths = v[3].buf;
    const uint32_t *ids = v[4].buf;
    const uint8_t *term_whole = v[6].buf, *term_part = v[7].buf;
    int32_t *table = v[8].buf;
    uint8_t *whole = v[9].buf, *part = v[10].buf;
    int bad_row = 0;
    Rows rows = {docs, arena, vocab, starts, lengths, ids, table, term_whole, term_part, words};
    Py_BEGIN_ALLOW_THREADS
    engram_number_terms(table, qids, t);
    for (Py_ssize_t i = 0; i < m && !bad_row; i++)
        bad_row = mark_words(&rows, ords[i], prev ? prev[i] : -1, whole + i * words, part + i * words);
    engram_unnumber_terms(table, qids, t);
    Py_END_ALLOW_THREADS
    result = engram_rows_result(bad_row);
done:
    engram_release_all(v, 11);
    return result;
}

const char engram_word_coverage_doc[] =
"word_coverage(ords, prev, starts, lengths, ids, qids, term_whole, term_part, table, weights, out)\n--\n\n"
"Write into out (float64, one per ordinal) the keyword coverage of the words each ordinal's row, or\n"
"the row at prev beside it, holds (word_presence's arguments): the weights (float64, one per word)\n"
"of the words held whole, plus half those of the words held only in part, each sum taken word after\n"
"word, over all the weights summed the same way (so that a row holding every word covers exactly\n"
"1). An ordinal outside the counts holds nothing: 0.";

PyObject *engram_word_coverage(PyObject *self, PyObject *args)
{
    PyObject *objs[11];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOO:word_coverage", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6], &objs[7], &objs[8], &objs[9], &objs[10]))
        return NULL;
    static const char *names[11] = {"ords", "prev", "starts", "lengths", "ids", "qids", "term_whole", "term_part",
                                    "table", "weights", "out"};
    Py_buffer v[11];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    uint8_t *scratch = NULL;
    if (engram_get_buffers(objs, v, 11, 8, names) < 0)
        goto done;
    Py_ssize_t m = v[0].len / 8, docs = v[2].len / 8, arena = v[4].len / 4, t = v[5].len / 8;
    Py_ssize_t vocab = v[8].len / 4;
    /* (the words are term_whole's columns; with no query term, the weights say how many) */
    Py_ssize_t words = t ? v[6].len / t : v[9].len / 8;
    if (check_row_args(v) < 0 || engram_check_array(&v[6], 1, "?B", t * words, "term_whole") < 0
        || engram_check_array(&v[7], 1, "?B", t * words, "term_part") < 0
        || engram_check_array(&v[9], 8, "d", words, "weights") < 0 || engram_check_array(&v[10], 8, "d", m, "out") < 0)
        goto done;
    Py_ssize_t n_prev = v[1].len / 8;
    const int64_t *qids = v[5].buf;
    scratch = PyMem_Calloc(2 * (size_t)words + 2, 1);  /* one ordinal's whole and part words */
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *ords = v[0].buf, *prev = n_prev ? v[1].buf : NULL;
    const double *weights = v[9].buf;
    double *out = v[10].buf;
    uint8_t *whole = scratch, *part = scratch + words;
    int32_t *table = v[8].buf;
    Rows rows = {docs, arena, vocab, v[2].buf, v[3].buf, v[4].buf, table, v[6].buf, v[7].buf, words};
    double total = 0.0;
    for (Py_ssize_t j = 0; j < words; j++)
        total += weights[j];
    int bad_row = 0;
    Py_BEGIN_ALLOW_THREADS
    engram_number_terms(table, qids, t);
    for (Py_ssize_t i = 0; i < m && !bad_row; i++) {
        memset(scratch, 0, 2 * (size_t)words);
        if (t)
            bad_row = mark_words(&rows, ords[i], prev ? prev[i] : -1, whole, part);
        double held = 0.0, half = 0.0;  /* summed word after word: the same figures on every CPU */
        for (Py_ssize_t j = 0; j < words; j++) {
            if (whole[j])
                held += weights[j];
            else if (part[j])
                half += weights[j];
        }
        out[i] = total > 0.0 ? (held + 0.5 * half) / total : 0.0;  /* (no word, or none weighs: nothing to cover) */
    }
    engram_unnumber_terms(table, qids, t);
    Py_END_ALLOW_THREADS
    result = engram_rows_result(bad_row);
done:
    PyMem_Free(scratch);
    engram_release_all(v, 11);
    return result;
}
