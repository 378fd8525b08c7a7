/* The term counts' inverted postings and the exact keyword scoring over them (module functions of
 * _kernels, registered in _kernels.c).
 *
 * Why: keyword-only search must return the exact top-k by our own BM25 (engine/termcounts.py),
 * and tantivy ranks by its own sum, so a window of its best matches can miss documents that ours
 * ranks high. Scoring every document that holds a query term, term at a time over postings, costs
 * the postings' length and no more (docs/design/engine.md has the measurements). Both loops are
 * scalar (no vectorised variant, so nothing to twin) and release the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_kernels.h"

const char engram_build_postings_doc[] =
"build_postings(starts, lengths, ids, tfs, post_starts, post_ords, post_tfs)\n--\n\n"
"Invert the term counts' rows: ordinal o's row is ids/tfs[starts[o] : starts[o] + lengths[o]]\n"
"(int64 starts, int32 lengths, negative: no row; uint32 ids, uint16 counts). Writes post_starts\n"
"(int64, one more than the vocabulary), and each term's holders in ascending ordinal order into\n"
"post_ords (int32) and their counts into post_tfs (uint16), both sized to the rows' entries.";

PyObject *engram_build_postings(PyObject *self, PyObject *args)
{
    PyObject *objs[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO:build_postings", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6]))
        return NULL;
    static const char *names[7] = {"starts", "lengths", "ids", "tfs", "post_starts", "post_ords", "post_tfs"};
    Py_buffer v[7];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    int64_t *cursor = NULL;
    if (engram_get_buffers(objs, v, 7, 4, names) < 0)
        goto done;
    Py_ssize_t docs = v[0].len / 8, arena = v[2].len / 4, vocab = v[4].len / 8 - 1, total = v[5].len / 4;
    if (engram_check_array(&v[0], 8, "ql", -1, "starts") < 0 || engram_check_array(&v[1], 4, "i", docs, "lengths") < 0
        || engram_check_array(&v[2], 4, "I", -1, "ids") < 0 || engram_check_array(&v[3], 2, "H", arena, "tfs") < 0
        || engram_check_array(&v[4], 8, "ql", -1, "post_starts") < 0 || engram_check_array(&v[5], 4, "i", -1, "post_ords") < 0
        || engram_check_array(&v[6], 2, "H", total, "post_tfs") < 0)
        goto done;
    if (vocab < 0) {
        PyErr_SetString(PyExc_ValueError, "post_starts must hold one more value than the vocabulary");
        goto done;
    }
    if (docs > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "ordinals must fit in int32");
        goto done;
    }
    cursor = PyMem_RawMalloc(((size_t)vocab + 1) * sizeof(int64_t));
    if (cursor == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *starts = v[0].buf;
    const int32_t *lengths = v[1].buf;
    const uint32_t *ids = v[2].buf;
    const uint16_t *tfs = v[3].buf;
    int64_t *post_starts = v[4].buf;
    int32_t *post_ords = v[5].buf;
    uint16_t *post_tfs = v[6].buf;
    const char *problem = NULL;
    Py_BEGIN_ALLOW_THREADS
    memset(post_starts, 0, ((size_t)vocab + 1) * sizeof(int64_t));
    Py_ssize_t entries = 0;
    for (Py_ssize_t o = 0; o < docs && problem == NULL; o++) {
        if (lengths[o] <= 0)
            continue;
        int64_t from = starts[o], stop = from + lengths[o];
        if (from < 0 || stop > arena) {
            problem = "a row lies outside the arena";
            break;
        }
        for (int64_t j = from; j < stop; j++) {
            if (ids[j] >= (uint32_t)vocab) {
                problem = "a term id lies outside the vocabulary";
                break;
            }
            post_starts[ids[j] + 1]++;
        }
        entries += lengths[o];
    }
    if (problem == NULL && entries != total)
        problem = "post_ords and post_tfs must hold one entry per row entry";
    if (problem == NULL) {
        for (Py_ssize_t t = 0; t < vocab; t++)
            post_starts[t + 1] += post_starts[t];
        memcpy(cursor, post_starts, ((size_t)vocab + 1) * sizeof(int64_t));
        /* Ordinals are visited in ascending order, so each term's holders come out sorted. */
        for (Py_ssize_t o = 0; o < docs; o++) {
            if (lengths[o] <= 0)
                continue;
            for (int64_t j = starts[o], stop = starts[o] + lengths[o]; j < stop; j++) {
                int64_t at = cursor[ids[j]]++;
                post_ords[at] = (int32_t)o;
                post_tfs[at] = tfs[j];
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_RawFree(cursor);
    engram_release_all(v, 7);
    return result;
}

const char engram_postings_scores_doc[] =
"postings_scores(post_starts, post_ords, post_tfs, doc_lengths, tids, kinds, groups, weights, idf,\n"
"                k1, b, average, stale, allowed, acc, mark, touched, values)\n--\n\n"
"Score every document holding a query term, term at a time over the postings; return how many.\n"
"Query column q is term tids[q] (int64; negative: absent) with weight weights[q] x idf[q]\n"
"(float64, > 0) and a kind (int64): 0 adds its part, 1 adds it and marks the document with\n"
"groups[q] (a word's stem), 2 adds it only where that group's mark is not set (the word's exact\n"
"form, where the stem is absent). stale and allowed (bool, or None) skip documents: stale ones,\n"
"and ones not allowed (beyond allowed's end: not allowed). acc (float64) and mark (int32) are\n"
"zeroed scratch, one per ordinal, left zeroed; touched (int64) and values (float64), as long,\n"
"receive each scored ordinal (in the order first met) and its score.";

/* A bool-or-None mask's view: *n = -1 for None. */
static int optional_mask(PyObject *obj, Py_buffer *view, const char *name, Py_ssize_t *n)
{
    *n = -1;
    if (obj == Py_None)
        return 0;
    if (engram_get_buffer(obj, view, 0, name) < 0 || engram_check_array(view, 1, "?Bb", -1, name) < 0)
        return -1;
    *n = view->len;
    return 0;
}

PyObject *engram_postings_scores(PyObject *self, PyObject *args)
{
    PyObject *objs[16];
    double k1, b, average;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOdddOOOOOO:postings_scores", &objs[0], &objs[1], &objs[2], &objs[3],
                          &objs[4], &objs[5], &objs[6], &objs[7], &objs[8], &k1, &b, &average, &objs[9], &objs[10],
                          &objs[11], &objs[12], &objs[13], &objs[14]))
        return NULL;
    static const char *names[16] = {"post_starts", "post_ords", "post_tfs", "doc_lengths", "tids", "kinds",
                                    "groups", "weights", "idf", "stale", "allowed", "acc", "mark", "touched",
                                    "values", ""};
    Py_buffer v[15];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    for (int i = 0; i < 15; i++) {
        if (i == 9 || i == 10)
            continue;
        if (engram_get_buffer(objs[i], &v[i], i >= 11, names[i]) < 0)
            goto done;
    }
    Py_ssize_t stale_n, allowed_n;
    if (optional_mask(objs[9], &v[9], "stale", &stale_n) < 0 || optional_mask(objs[10], &v[10], "allowed", &allowed_n) < 0)
        goto done;
    Py_ssize_t vocab = v[0].len / 8 - 1, total = v[1].len / 4, docs = v[3].len / 8, t = v[4].len / 8, m = v[11].len / 8;
    if (engram_check_array(&v[0], 8, "ql", -1, "post_starts") < 0 || engram_check_array(&v[1], 4, "i", -1, "post_ords") < 0
        || engram_check_array(&v[2], 2, "H", total, "post_tfs") < 0 || engram_check_array(&v[3], 8, "ql", -1, "doc_lengths") < 0
        || engram_check_array(&v[4], 8, "ql", -1, "tids") < 0 || engram_check_array(&v[5], 8, "ql", t, "kinds") < 0
        || engram_check_array(&v[6], 8, "ql", t, "groups") < 0 || engram_check_array(&v[7], 8, "d", t, "weights") < 0
        || engram_check_array(&v[8], 8, "d", t, "idf") < 0 || engram_check_array(&v[11], 8, "d", -1, "acc") < 0
        || engram_check_array(&v[12], 4, "i", m, "mark") < 0 || engram_check_array(&v[13], 8, "ql", m, "touched") < 0
        || engram_check_array(&v[14], 8, "d", m, "values") < 0)
        goto done;
    if (vocab < 0) {
        PyErr_SetString(PyExc_ValueError, "post_starts must hold one more value than the vocabulary");
        goto done;
    }
    const int64_t *post_starts = v[0].buf, *doc_lengths = v[3].buf, *tids = v[4].buf, *kinds = v[5].buf;
    const int64_t *groups = v[6].buf;
    const int32_t *post_ords = v[1].buf;
    const uint16_t *post_tfs = v[2].buf;
    const double *weights = v[7].buf, *idf = v[8].buf;
    const uint8_t *stale = v[9].buf, *allowed = v[10].buf;
    for (Py_ssize_t q = 0; q < t; q++) {
        if (tids[q] >= vocab || kinds[q] < 0 || kinds[q] > 2 || !(weights[q] > 0) || !(idf[q] > 0)
            || (tids[q] >= 0 && (post_starts[tids[q]] < 0 || post_starts[tids[q]] > post_starts[tids[q] + 1]
                                 || post_starts[tids[q] + 1] > total))) {
            PyErr_Format(PyExc_ValueError, "query column %zd: term, kind, weight or postings out of range", q);
            goto done;
        }
    }
    double *acc = v[11].buf, *values = v[14].buf;
    int32_t *mark = v[12].buf;
    int64_t *touched = v[13].buf;
    Py_ssize_t n = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t q = 0; q < t; q++) {
        if (tids[q] < 0)
            continue;
        double scale = weights[q] * idf[q] * (k1 + 1.0);
        int64_t kind = kinds[q];
        int32_t group = (int32_t)groups[q];
        for (int64_t p = post_starts[tids[q]], stop = post_starts[tids[q] + 1]; p < stop; p++) {
            int32_t d = post_ords[p];
            if (d < 0 || d >= m || d >= docs)
                continue;
            if (stale_n >= 0 && d < stale_n && stale[d])
                continue;
            if (allowed_n >= 0 && (d >= allowed_n || !allowed[d]))
                continue;
            if (kind == 2 && mark[d] == group)
                continue;
            double tf = (double)post_tfs[p];
            double norm = k1 * (average > 0 ? 1.0 - b + b * (double)doc_lengths[d] / average : 1.0 - b);
            if (acc[d] == 0.0)
                touched[n++] = d;
            acc[d] += scale * tf / (tf + norm);
            if (kind == 1)
                mark[d] = group;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t d = touched[i];
        values[i] = acc[d];
        acc[d] = 0.0;
        mark[d] = 0;
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(n);
done:
    engram_release_all(v, 15);
    return result;
}

const char engram_combine_scores_doc[] =
"combine_scores(parts, plain, stems, exacts, part_cols, part_weight, out)\n--\n\n"
"Add up each row of parts (float64, rows x columns: a query term's BM25 part per column) into out\n"
"(float32, one per row) as keyword._score's numpy did, bit for bit: the plain columns (int64\n"
"indexes), plus per stemmed word its stem's column where positive, else its exact form's (stems\n"
"and exacts, int64, aligned), plus part_weight x the part columns. Each group is summed as numpy's\n"
"sum over axis 1 sums it: column by column for two rows or more, pairwise for a single row.";

/* 0 when each of the n columns is within [0, width), else -1 with IndexError set. */
static int columns_inside(const int64_t *cols, Py_ssize_t n, Py_ssize_t width)
{
    for (Py_ssize_t j = 0; j < n; j++)
        if (cols[j] < 0 || cols[j] >= width) {
            PyErr_Format(PyExc_IndexError, "column %lld is outside the %zd columns", (long long)cols[j], width);
            return -1;
        }
    return 0;
}

/* The sum of n gathered values as numpy sums a row of a (rows x n) array over axis 1. */
static double row_sum(const double *values, Py_ssize_t n, Py_ssize_t rows)
{
    if (rows == 1)
        return engram_pairwise_sum(values, n);
    double res = 0.;
    for (Py_ssize_t i = 0; i < n; i++)
        res += values[i];
    return res;
}

/* combine_scores' sums, the GIL released by the caller: each row summed as a row of a call of
 * `as_rows` rows (1: pairwise); gathered holds the most columns of a role (_kernels.h). */
void engram_combine_into(const double *parts, Py_ssize_t rows, Py_ssize_t width, const int64_t *const cols[4],
                         const Py_ssize_t counts[4], double part_weight, Py_ssize_t as_rows, double *gathered,
                         float *out)
{
    Py_ssize_t np_ = counts[0], ns = counts[1], nq = counts[3];
    for (Py_ssize_t r = 0; r < rows; r++) {
        const double *row = parts + r * width;
        double total = 0.0;
        if (np_) {
            for (Py_ssize_t j = 0; j < np_; j++)
                gathered[j] = row[cols[0][j]];
            total = row_sum(gathered, np_, as_rows);
        }
        if (ns) {
            for (Py_ssize_t j = 0; j < ns; j++) {
                double stem = row[cols[1][j]];
                gathered[j] = stem > 0 ? stem : row[cols[2][j]];
            }
            total += row_sum(gathered, ns, as_rows);
        }
        if (nq) {
            for (Py_ssize_t j = 0; j < nq; j++)
                gathered[j] = row[cols[3][j]];
            total += part_weight * row_sum(gathered, nq, as_rows);
        }
        out[r] = (float)total;
    }
}

PyObject *engram_combine_scores(PyObject *self, PyObject *args)
{
    PyObject *objs[6];
    double part_weight;
    if (!PyArg_ParseTuple(args, "OOOOOdO:combine_scores", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &part_weight, &objs[5]))
        return NULL;
    static const char *names[6] = {"parts", "plain", "stems", "exacts", "part_cols", "out"};
    Py_buffer v[6];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    double *gathered = NULL;
    if (engram_get_buffers(objs, v, 6, 5, names) < 0)
        goto done;
    Py_ssize_t rows = v[5].len / 4, np_ = v[1].len / 8, ns = v[2].len / 8, nq = v[4].len / 8;
    if (engram_check_array(&v[0], 8, "d", -1, "parts") < 0 || engram_check_array(&v[1], 8, "ql", -1, "plain") < 0
        || engram_check_array(&v[2], 8, "ql", -1, "stems") < 0 || engram_check_array(&v[3], 8, "ql", ns, "exacts") < 0
        || engram_check_array(&v[4], 8, "ql", -1, "part_cols") < 0 || engram_check_array(&v[5], 4, "f", -1, "out") < 0)
        goto done;
    if (rows == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t width = (v[0].len / 8) / rows;
    if (width * rows != v[0].len / 8) {
        PyErr_SetString(PyExc_ValueError, "parts must hold a row per value of out");
        goto done;
    }
    const int64_t *cols[4] = {v[1].buf, v[2].buf, v[3].buf, v[4].buf};
    Py_ssize_t counts[4] = {np_, ns, ns, nq};
    for (int g = 0; g < 4; g++)
        if (columns_inside(cols[g], counts[g], width) < 0)
            goto done;
    Py_ssize_t most = np_ > ns ? np_ : ns;
    most = most > nq ? most : nq;
    gathered = PyMem_RawMalloc(((size_t)most + 1) * sizeof(double));
    if (gathered == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const double *parts = v[0].buf;
    float *out = v[5].buf;
    Py_BEGIN_ALLOW_THREADS
    engram_combine_into(parts, rows, width, cols, counts, part_weight, rows, gathered, out);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyMem_RawFree(gathered);
    engram_release_all(v, 6);
    return result;
}

const char engram_select_top_doc[] =
"select_top(ords, values, k, margin) -> int\n--\n\n"
"Keep, in order, the ordinals (int64, writable) whose value (float64, one per ordinal) is at least\n"
"the k-th largest value less margin x its magnitude (all of them when there are at most k), moving\n"
"them to the front of ords; return how many. The same as numpy's partition and mask over them.";

/* The k-th largest of n doubles (k <= n): a min-heap of the k largest seen, which most values
 * pass by with one comparison. */
static double kth_largest(const double *values, Py_ssize_t n, Py_ssize_t k, double *heap)
{
    memcpy(heap, values, (size_t)k * sizeof(double));
    for (Py_ssize_t i = k / 2; i-- > 0;)
        engram_sift(heap, k, i);
    for (Py_ssize_t i = k; i < n; i++)
        if (values[i] > heap[0]) {
            heap[0] = values[i];
            engram_sift(heap, k, 0);
        }
    return heap[0];
}

PyObject *engram_select_top(PyObject *self, PyObject *args)
{
    PyObject *o_obj, *v_obj;
    Py_ssize_t k;
    double margin;
    if (!PyArg_ParseTuple(args, "OOnd:select_top", &o_obj, &v_obj, &k, &margin))
        return NULL;
    Py_buffer v[2];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    double *buf = NULL;
    if (engram_get_buffer(o_obj, &v[0], 1, "ords") < 0 || engram_get_buffer(v_obj, &v[1], 0, "values") < 0)
        goto done;
    Py_ssize_t n = v[0].len / 8;
    if (engram_check_array(&v[0], 8, "ql", -1, "ords") < 0 || engram_check_array(&v[1], 8, "d", n, "values") < 0)
        goto done;
    if (k <= 0) {
        PyErr_SetString(PyExc_ValueError, "k must be positive");
        goto done;
    }
    if (n <= k) {
        result = PyLong_FromSsize_t(n);
        goto done;
    }
    buf = PyMem_RawMalloc((size_t)k * sizeof(double));
    if (buf == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *ords = v[0].buf;
    const double *values = v[1].buf;
    Py_ssize_t kept = 0;
    Py_BEGIN_ALLOW_THREADS
    double kth = kth_largest(values, n, k, buf);
    double threshold = kth - margin * fabs(kth);
    for (Py_ssize_t i = 0; i < n; i++)
        if (values[i] >= threshold)
            ords[kept++] = ords[i];
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(kept);
done:
    PyMem_RawFree(buf);
    engram_release_all(v, 2);
    return result;
}

const char engram_word_sums_doc[] =
"word_sums(parts, counts, cols, part_weight, out)\n--\n\n"
"combine_scores for each word of a query at once: word j's columns are the next counts[j] (int64,\n"
"words x 4: plain, stems, exacts, part columns; as many exacts as stems) of cols (int64), taken in\n"
"order, and its sums go to column j of out (float32, rows x words), each bit for bit what\n"
"combine_scores(parts, plain, stems, exacts, part_cols, part_weight, out[:, j]) writes.";

PyObject *engram_word_sums(PyObject *self, PyObject *args)
{
    PyObject *objs[4];
    double part_weight;
    if (!PyArg_ParseTuple(args, "OOOdO:word_sums", &objs[0], &objs[1], &objs[2], &part_weight, &objs[3]))
        return NULL;
    static const char *names[4] = {"parts", "counts", "cols", "out"};
    Py_buffer v[4];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    double *gathered = NULL;
    float *column = NULL;
    if (engram_get_buffers(objs, v, 4, 3, names) < 0)
        goto done;
    Py_ssize_t words = v[1].len / 32, total = v[2].len / 8;
    if (engram_check_array(&v[0], 8, "d", -1, "parts") < 0 || engram_check_array(&v[1], 8, "ql", -1, "counts") < 0
        || engram_check_array(&v[2], 8, "ql", -1, "cols") < 0 || engram_check_array(&v[3], 4, "f", -1, "out") < 0)
        goto done;
    const int64_t *counts = v[1].buf, *cols = v[2].buf;
    if (words * 4 != v[1].len / 8 || (words == 0 ? v[3].len != 0 : (v[3].len / 4) % words != 0)) {
        PyErr_SetString(PyExc_ValueError, "counts must hold 4 per word, and out a row of one per word");
        goto done;
    }
    Py_ssize_t rows = words ? (v[3].len / 4) / words : 0, width = rows ? (v[0].len / 8) / rows : 0;
    if (rows && width * rows != v[0].len / 8) {
        PyErr_SetString(PyExc_ValueError, "parts must hold a row per row of out");
        goto done;
    }
    Py_ssize_t used = 0, most = 0;
    for (Py_ssize_t j = 0; j < words; j++) {
        const int64_t *n = counts + 4 * j;
        if (n[0] < 0 || n[1] < 0 || n[2] != n[1] || n[3] < 0) {
            PyErr_Format(PyExc_ValueError, "word %zd: counts must be whole, as many exacts as stems", j);
            goto done;
        }
        for (int g = 0; g < 4; g++)
            most = n[g] > most ? n[g] : most;
        used += n[0] + n[1] + n[2] + n[3];
    }
    if (used != total) {
        PyErr_Format(PyExc_ValueError, "the counts name %zd columns, cols holds %zd", used, total);
        goto done;
    }
    if (rows && columns_inside(cols, total, width) < 0) /* (no rows: no width to read columns from) */
        goto done;
    gathered = PyMem_RawMalloc(((size_t)most + 1) * sizeof(double));
    column = PyMem_RawMalloc(((size_t)rows + 1) * sizeof(float));
    if (gathered == NULL || column == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const double *parts = v[0].buf;
    float *out = v[3].buf;
    Py_BEGIN_ALLOW_THREADS
    const int64_t *at = cols;
    for (Py_ssize_t j = 0; j < words && rows; j++) {
        const int64_t *n = counts + 4 * j;
        const int64_t *const by_role[4] = {at, at + n[0], at + n[0] + n[1], at + n[0] + n[1] + n[2]};
        const Py_ssize_t how_many[4] = {n[0], n[1], n[2], n[3]};
        engram_combine_into(parts, rows, width, by_role, how_many, part_weight, rows, gathered, column);
        for (Py_ssize_t r = 0; r < rows; r++)
            out[r * words + j] = column[r];
        at += n[0] + n[1] + n[2] + n[3];
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyMem_RawFree(gathered);
    PyMem_RawFree(column);
    engram_release_all(v, 4);
    return result;
}
