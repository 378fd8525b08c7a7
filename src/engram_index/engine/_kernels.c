/* The engine's compiled inner loops: the vector index's coarse scan (Hamming distances from one
 * packed sign code to many, and the nearest of them), its exact re-rank (cosines against float16
 * rows, read where they lie), the rows' squared norms and the term counts' BM25 parts.
 *
 * Why the scan is ours and not simsimd's: simsimd's `hamming` over 100k rows of 48 bytes spends
 * most of its ~0.8 ms in its per-row dispatch and result casting, not in the popcounts; one
 * tight loop over 64-bit words does the same scan in a fraction of that (bench/vector_choices.py).
 * The re-rank gathered its rows into a copy before simsimd's dot products; it now reads them in
 * place. The BM25 parts replace some forty numpy calls over a few thousand entries, whose fixed costs
 * were most of the keyword stage's own time. Every loop releases the GIL, so a search's kernels
 * overlap another thread's Python.
 *
 * This file is the Python module: it checks every buffer and calls the loops, which are in
 * _kernels_loops.c (declared in _kernels.h), except the BM25 walk, which is short enough to stay.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_kernels.h"

/* How many rows ahead the random-order loops ask for the rows they will read (see engram_prefetch). */
#define AHEAD 8

/* Set by use_portable(): every kernel then runs its plain C loop, whatever the CPU offers, so that
 * the tests can run both loops of each kernel on one machine. Read under the GIL at each call. */
static int force_portable = 0;

int engram_portable(void)
{
    return force_portable;
}

/* Cleared by use_avx512(False) and use_avx2(False): the scan runs a loop below its fastest (AVX2 in
 * place of AVX-512 VPOPCNTDQ; popcnt in place of both), so that the tests can run each of its
 * loops on a machine that has them all. Read under the GIL. */
static int allow_avx512 = 1, allow_avx2 = 1;

/* The scan's level for engram_select_scan (_kernels.h). */
int engram_scan_level(void)
{
    return force_portable ? 3 : !allow_avx2 ? 2 : !allow_avx512 ? 1 : 0;
}
#define scan_level engram_scan_level


int engram_get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous%s buffer", name, writable ? " writable" : "");
        return -1;
    }
    return 0;
}

/* Acquire views of the first `count` objects, those from `writable_from` on writable (every kernel
 * takes its outputs last); -1 with TypeError set at the first that fails (release them all after). */
int engram_get_buffers(PyObject *const *objs, Py_buffer *views, int count, int writable_from, const char *const *names)
{
    for (int i = 0; i < count; i++)
        if (engram_get_buffer(objs[i], &views[i], i >= writable_from, names[i]) < 0)
            return -1;
    return 0;
}

/* Release the acquired views of an array of them (a zeroed view was never acquired). */
void engram_release_all(Py_buffer *views, int count)
{
    for (int i = 0; i < count; i++)
        if (views[i].obj)
            PyBuffer_Release(&views[i]);
}

/* Say whether a buffer holds items of one byte-size and one of the given struct formats. */
int engram_has_format(const Py_buffer *view, Py_ssize_t itemsize, const char *formats)
{
    const char *f = view->format == NULL ? "B" : view->format;
    if (f[0] == '<' || f[0] == '=' || f[0] == '@')
        f++;
    return view->itemsize == itemsize && strlen(f) == 1 && strchr(formats, f[0]) != NULL;
}

/* Check the query and codes and give the number of rows, or -1 with an exception set. */
static Py_ssize_t rows_of(const Py_buffer *q, const Py_buffer *c)
{
    if (!engram_has_format(q, 1, "Bb?") || !engram_has_format(c, 1, "Bb?")) {
        PyErr_SetString(PyExc_TypeError, "query and codes must hold bytes (uint8)");
        return -1;
    }
    if (q->len == 0 || q->len > 8191) { /* distances must fit in uint16 */
        PyErr_Format(PyExc_ValueError, "a code must be 1 to 8191 bytes, got %zd", q->len);
        return -1;
    }
    if (c->len % q->len != 0) {
        PyErr_Format(PyExc_ValueError, "codes (%zd bytes) are not rows of the query's %zd bytes", c->len, q->len);
        return -1;
    }
    return c->len / q->len;
}

/* Count the distances from q to each of the n rows of c into dist, with the GIL released. */
static void scan(const Py_buffer *q, const Py_buffer *c, Py_ssize_t n, uint16_t *dist)
{
    const char *name;
    engram_scan_fn scan_rows = engram_select_scan(scan_level(), &name);
    Py_BEGIN_ALLOW_THREADS
    scan_rows((const uint8_t *)q->buf, (const uint8_t *)c->buf, n, q->len, NULL, dist);
    Py_END_ALLOW_THREADS
}

PyDoc_STRVAR(hamming_doc,
"hamming(query, codes, out)\n--\n\n"
"Write into out (uint16, one per row) the Hamming distance from query (uint8, width bytes) to\n"
"each row of codes (uint8, rows of width bytes, C-contiguous).");

static PyObject *hamming(PyObject *self, PyObject *args)
{
    PyObject *q_obj, *c_obj, *o_obj;
    if (!PyArg_ParseTuple(args, "OOO:hamming", &q_obj, &c_obj, &o_obj))
        return NULL;
    Py_buffer v[3];
    memset(v, 0, sizeof(v));
    Py_buffer *q = &v[0], *c = &v[1], *o = &v[2];
    PyObject *result = NULL;
    if (engram_get_buffer(q_obj, q, 0, "query") < 0 || engram_get_buffer(c_obj, c, 0, "codes") < 0
        || engram_get_buffer(o_obj, o, 1, "out") < 0)
        goto done;
    Py_ssize_t n = rows_of(q, c);
    if (n < 0)
        goto done;
    if (!engram_has_format(o, 2, "H")) {
        PyErr_SetString(PyExc_TypeError, "out must hold uint16");
        goto done;
    }
    if (o->len / 2 != n) {
        PyErr_Format(PyExc_ValueError, "out holds %zd values for %zd rows", o->len / 2, n);
        goto done;
    }
    scan(q, c, n, (uint16_t *)o->buf);
    result = Py_NewRef(Py_None);
done:
    engram_release_all(v, 3);
    return result;
}


PyDoc_STRVAR(nearest_doc,
"nearest(query, codes, excluded, out) -> int\n--\n\n"
"Find the len(out) rows of codes nearest to query by Hamming distance, skipping the rows whose byte\n"
"in excluded is set (excluded: None or one byte per row), and write their ordinals (int64) into out\n"
"in ascending order; ties at the cut go to the lower ordinals. Return how many were written.");

static PyObject *nearest(PyObject *self, PyObject *args)
{
    PyObject *q_obj, *c_obj, *e_obj, *o_obj;
    if (!PyArg_ParseTuple(args, "OOOO:nearest", &q_obj, &c_obj, &e_obj, &o_obj))
        return NULL;
    Py_buffer v[4];
    memset(v, 0, sizeof(v));
    Py_buffer *q = &v[0], *c = &v[1], *e = &v[2], *o = &v[3];
    PyObject *result = NULL;
    if (engram_get_buffer(q_obj, q, 0, "query") < 0 || engram_get_buffer(c_obj, c, 0, "codes") < 0
        || (e_obj != Py_None && engram_get_buffer(e_obj, e, 0, "excluded") < 0) || engram_get_buffer(o_obj, o, 1, "out") < 0)
        goto done;
    Py_ssize_t n = rows_of(q, c);
    if (n < 0)
        goto done;
    if (e->obj != NULL && (!engram_has_format(e, 1, "Bb?") || e->len != n)) {
        PyErr_Format(PyExc_ValueError, "excluded must hold one byte per row (%zd), got %zd", n, e->len);
        goto done;
    }
    if (!engram_has_format(o, 8, "ql")) {
        PyErr_SetString(PyExc_TypeError, "out must hold int64");
        goto done;
    }
    Py_ssize_t written;
    int level = scan_level();
    Py_BEGIN_ALLOW_THREADS
    written = engram_nearest_into((const uint8_t *)q->buf, q->len, (const uint8_t *)c->buf, n,
                                  e->obj ? (const uint8_t *)e->buf : NULL, (int64_t *)o->buf, o->len / 8, level);
    Py_END_ALLOW_THREADS
    if (written < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyLong_FromSsize_t(written);
done:
    engram_release_all(v, 4);
    return result;
}

/* nearest's work, the GIL released by the caller (_kernels.h). */
Py_ssize_t engram_nearest_into(const uint8_t *query, Py_ssize_t width, const uint8_t *codes, Py_ssize_t n,
                               const uint8_t *excluded, int64_t *out, Py_ssize_t count, int level)
{
    uint16_t *dist = engram_scratch(n);
    if (dist == NULL)
        return -1;
    const char *name;
    engram_select_scan(level, &name)(query, codes, n, width, excluded, dist);
    return engram_pick_nearest(dist, n, width * 8, out, count, level);
}


/* Check that a buffer holds `count` items of one of the given formats and size, or set an error. */
int engram_check_array(const Py_buffer *view, Py_ssize_t itemsize, const char *formats, Py_ssize_t count,
                       const char *name)
{
    if (!engram_has_format(view, itemsize, formats)) {
        PyErr_Format(PyExc_TypeError, "%s has the wrong item type", name);
        return -1;
    }
    if (count >= 0 && view->len / itemsize != count) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd items, expected %zd", name, view->len / itemsize, count);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(bm25_parts_doc,
"bm25_parts(ords, starts, lengths, doc_lengths, ids, tfs, qids, cols, idf, table, k1, b, average, out)\n--\n\n"
"Write each query term's BM25 part for each ordinal into out (float64, ordinals x columns, zeroed):\n"
"ordinal o's row is ids/tfs[starts[o] : starts[o] + lengths[o]] (uint32 term ids, uint16 counts;\n"
"lengths int32, negative: no row; starts and doc_lengths int64); query term q has id qids[q]\n"
"(int64), column cols[q] (int64) and weight idf[q] (float64). table (int32, zero, one slot per\n"
"term id, left zero) is scratch. Ordinals outside the counts are skipped.");

static PyObject *bm25_parts(PyObject *self, PyObject *args)
{
    PyObject *objs[11];
    double k1, b, average;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOdddO:bm25_parts", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6], &objs[7], &objs[8], &objs[9], &k1, &b, &average, &objs[10]))
        return NULL;
    static const char *names[11] = {"ords", "starts", "lengths", "doc_lengths", "ids", "tfs",
                                    "qids", "cols", "idf", "table", "out"};
    Py_buffer v[11];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    if (engram_get_buffers(objs, v, 11, 9, names) < 0)
        goto done;
    Py_ssize_t m = v[0].len / 8, docs = v[1].len / 8, arena = v[4].len / 4, t = v[6].len / 8;
    Py_ssize_t vocab = v[9].len / 4;
    if (engram_check_array(&v[0], 8, "ql", -1, "ords") < 0 || engram_check_array(&v[1], 8, "ql", -1, "starts") < 0
        || engram_check_array(&v[2], 4, "i", docs, "lengths") < 0 || engram_check_array(&v[3], 8, "ql", docs, "doc_lengths") < 0
        || engram_check_array(&v[4], 4, "I", -1, "ids") < 0 || engram_check_array(&v[5], 2, "H", arena, "tfs") < 0
        || engram_check_array(&v[6], 8, "ql", -1, "qids") < 0 || engram_check_array(&v[7], 8, "ql", t, "cols") < 0
        || engram_check_array(&v[8], 8, "d", t, "idf") < 0 || engram_check_array(&v[9], 4, "i", -1, "table") < 0
        || engram_check_array(&v[10], 8, "d", -1, "out") < 0)
        goto done;
    const int64_t *ords = v[0].buf, *starts = v[1].buf, *doc_lengths = v[3].buf, *qids = v[6].buf, *cols = v[7].buf;
    const int32_t *lengths = v[2].buf;
    const uint32_t *ids = v[4].buf;
    const uint16_t *tfs = v[5].buf;
    const double *idf = v[8].buf;
    int32_t *table = v[9].buf;
    double *out = v[10].buf;
    Py_ssize_t width = m == 0 ? 0 : (v[10].len / 8) / m;
    if (width * m != v[10].len / 8) {
        PyErr_Format(PyExc_ValueError, "out holds %zd values, not a row per ordinal", v[10].len / 8);
        goto done;
    }
    for (Py_ssize_t q = 0; q < t; q++) {
        if (qids[q] < 0 || qids[q] >= vocab || cols[q] < 0 || cols[q] >= width) {
            PyErr_Format(PyExc_ValueError, "query term %zd: id %lld or column %lld out of range", q,
                         (long long)qids[q], (long long)cols[q]);
            goto done;
        }
    }
    int bad_row;
    Py_BEGIN_ALLOW_THREADS
    bad_row = engram_bm25_into(ords, m, starts, lengths, doc_lengths, docs, ids, tfs, arena, qids, cols, idf, t,
                               table, vocab, k1, b, average, out, width);
    Py_END_ALLOW_THREADS
    result = engram_rows_result(bad_row);
done:
    engram_release_all(v, 11);
    return result;
}


/* bm25_parts' walk over the rows, the GIL released by the caller: 1 when a row lay outside the arena
 * (_kernels.h). */
int engram_bm25_into(const int64_t *ords, Py_ssize_t m, const int64_t *starts, const int32_t *lengths,
                     const int64_t *doc_lengths, Py_ssize_t docs, const uint32_t *ids, const uint16_t *tfs,
                     Py_ssize_t arena, const int64_t *qids, const int64_t *cols, const double *idf, Py_ssize_t t,
                     int32_t *table, Py_ssize_t vocab, double k1, double b, double average, double *out,
                     Py_ssize_t width)
{
    int bad_row = 0;
    engram_number_terms(table, qids, t);
    for (Py_ssize_t i = 0; i < m && !bad_row; i++) {
        /* Ordinals come in no useful order: ask early for the bounds of the row 2 * AHEAD on, and
         * for the row AHEAD on (whose bounds were asked for AHEAD steps ago), within the arena. */
        if (i + 2 * AHEAD < m && ords[i + 2 * AHEAD] >= 0 && ords[i + 2 * AHEAD] < docs) {
            int64_t later = ords[i + 2 * AHEAD];
            engram_prefetch(starts + later, 8);
            engram_prefetch(lengths + later, 4);
            engram_prefetch(doc_lengths + later, 8);
        }
        if (i + AHEAD < m && ords[i + AHEAD] >= 0 && ords[i + AHEAD] < docs && lengths[ords[i + AHEAD]] > 0) {
            int64_t next = ords[i + AHEAD], from = starts[next], count = lengths[next];
            if (from >= 0 && from < arena) {
                count = count < arena - from ? count : arena - from;
                engram_prefetch(ids + from, 4 * (Py_ssize_t)count);
                engram_prefetch(tfs + from, 2 * (Py_ssize_t)count);
            }
        }
        int64_t o = ords[i], start = 0, stop = 0;
        int held = engram_row_bounds(o, docs, lengths, starts, arena, &start, &stop);
        if (held < 0) {
            bad_row = 1;
            break;
        }
        if (held == 0)
            continue;
        double norm = k1 * (average > 0 ? 1.0 - b + b * (double)doc_lengths[o] / average : 1.0 - b);
        double *row = out + i * width;
        for (int64_t j = start; j < stop; j++) {
            uint32_t id = ids[j];
            int32_t hit = id < (uint32_t)vocab ? table[id] : 0;
            if (hit) {
                double tf = (double)tfs[j];
                row[cols[hit - 1]] = idf[hit - 1] * tf * (k1 + 1.0) / (tf + norm);
            }
        }
    }
    engram_unnumber_terms(table, qids, t);
    return bad_row;
}


PyDoc_STRVAR(cosines_doc,
"cosines(query, vectors, inv_norms, ords, out)\n--\n\n"
"Write into out (float32) the cosine of the query with the vector at each ordinal, clipped to\n"
"[-1, 1]: query (float64, d) is the unit query, vectors (float16, rows of d), inv_norms (float64,\n"
"one per row) their inverse norms, ords (int64) row numbers. Sums are taken in float64.");

static PyObject *cosines(PyObject *self, PyObject *args)
{
    PyObject *objs[5];
    if (!PyArg_ParseTuple(args, "OOOOO:cosines", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4]))
        return NULL;
    static const char *names[5] = {"query", "vectors", "inv_norms", "ords", "out"};
    Py_buffer v[5];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    if (engram_get_buffers(objs, v, 5, 4, names) < 0)
        goto done;
    Py_ssize_t d = v[0].len / 8, m = v[3].len / 8;
    if (engram_check_array(&v[0], 8, "d", -1, "query") < 0 || engram_check_array(&v[1], 2, "e", -1, "vectors") < 0
        || engram_check_array(&v[2], 8, "d", -1, "inv_norms") < 0 || engram_check_array(&v[3], 8, "ql", -1, "ords") < 0
        || engram_check_array(&v[4], 4, "f", m, "out") < 0)
        goto done;
    if (d == 0 || (v[1].len / 2) % d != 0) {
        PyErr_SetString(PyExc_ValueError, "the query must have d > 0 components and vectors rows of d");
        goto done;
    }
    Py_ssize_t rows = (v[1].len / 2) / d, norms = v[2].len / 8;
    const int64_t *ords = v[3].buf;
    for (Py_ssize_t i = 0; i < m; i++)
        if (ords[i] < 0 || ords[i] >= rows || ords[i] >= norms) {
            PyErr_Format(PyExc_ValueError, "ordinal %lld is outside the %zd vectors", (long long)ords[i], rows);
            goto done;
        }
    const double *q = v[0].buf;
    const uint16_t *vectors = v[1].buf;
    const double *inv_norms = v[2].buf;
    float *out = v[4].buf;
    const char *name;
    engram_dot_fn dot = engram_select_dot(force_portable, &name);
    Py_BEGIN_ALLOW_THREADS
    engram_cosines_into(q, d, vectors, inv_norms, ords, m, out, dot);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    engram_release_all(v, 5);
    return result;
}


/* cosines' loop, the GIL released by the caller (_kernels.h). */
void engram_cosines_into(const double *q, Py_ssize_t d, const uint16_t *vectors, const double *inv_norms,
                         const int64_t *ords, Py_ssize_t m, float *out, engram_dot_fn dot)
{
    for (Py_ssize_t i = 0; i < m && i < AHEAD; i++)
        engram_prefetch(vectors + ords[i] * d, d * 2);
    for (Py_ssize_t i = 0; i < m; i++) {
        if (i + AHEAD < m) {
            engram_prefetch(vectors + ords[i + AHEAD] * d, d * 2);
            engram_prefetch(inv_norms + ords[i + AHEAD], 8);
        }
        /* One rounding to float32, of the float64 sum scaled by the inverse norm. */
        float sim = (float)(dot(vectors + ords[i] * d, q, d) * inv_norms[ords[i]]);
        out[i] = sim > 1.0f ? 1.0f : (sim < -1.0f ? -1.0f : sim);
    }
}


PyDoc_STRVAR(self_dots_doc,
"self_dots(vectors, out)\n--\n\n"
"Write into out (float64, one per row) the squared norm of each row of vectors (float16, len(out)\n"
"rows), each product exact and the sum taken in float64.");

static PyObject *self_dots(PyObject *self, PyObject *args)
{
    PyObject *v_obj, *o_obj;
    if (!PyArg_ParseTuple(args, "OO:self_dots", &v_obj, &o_obj))
        return NULL;
    Py_buffer v[2];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    if (engram_get_buffer(v_obj, &v[0], 0, "vectors") < 0 || engram_get_buffer(o_obj, &v[1], 1, "out") < 0)
        goto done;
    if (engram_check_array(&v[0], 2, "e", -1, "vectors") < 0 || engram_check_array(&v[1], 8, "d", -1, "out") < 0)
        goto done;
    Py_ssize_t n = v[1].len / 8, values = v[0].len / 2;
    if (n == 0 ? values != 0 : values % n != 0 || values == 0) {
        PyErr_Format(PyExc_ValueError, "vectors (%zd values) are not %zd rows", values, n);
        goto done;
    }
    Py_ssize_t d = n == 0 ? 0 : values / n;
    const uint16_t *rows = v[0].buf;
    double *out = v[1].buf;
    engram_self_dot_fn self_dot = engram_select_self_dot(force_portable);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++)
        out[r] = self_dot(rows + r * d, d);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    engram_release_all(v, 2);
    return result;
}


PyDoc_STRVAR(use_portable_doc,
"use_portable(flag)\n--\n\n"
"Run every kernel's plain C loop (flag true) or the fastest loop the CPU runs (false, the default).\n"
"For tests: both loops give the same results, and each must be tested on its own.");

/* Set one of the loop switches to a Python truth value. */
static PyObject *set_switch(int *which, PyObject *arg)
{
    int flag = PyObject_IsTrue(arg);
    if (flag < 0)
        return NULL;
    *which = flag;
    Py_RETURN_NONE;
}

static PyObject *use_portable(PyObject *self, PyObject *arg)
{
    return set_switch(&force_portable, arg);
}


PyDoc_STRVAR(use_avx512_doc,
"use_avx512(flag)\n--\n\n"
"Let the coarse scan run its AVX-512 VPOPCNTDQ loop where the CPU has it (flag true, the default),\n"
"or the next below it (false: AVX2, else popcnt). For tests: every loop gives the same distances.");

static PyObject *use_avx512(PyObject *self, PyObject *arg)
{
    return set_switch(&allow_avx512, arg);
}

PyDoc_STRVAR(use_avx2_doc,
"use_avx2(flag)\n--\n\n"
"Let the coarse scan run a vector loop (AVX-512 VPOPCNTDQ or AVX2) where the CPU has one (flag true,\n"
"the default), or its popcnt loop (false). For tests: every loop gives the same distances.");

static PyObject *use_avx2(PyObject *self, PyObject *arg)
{
    return set_switch(&allow_avx2, arg);
}

PyDoc_STRVAR(loops_doc,
"loops() -> dict\n--\n\n"
"Name the loop each kernel runs now: {'scan': 'avx512-vpopcntdq', 'avx2', 'popcnt' or 'portable', 'dot':\n"
"'avx2+fma+f16c' or 'portable'} (dot: the re-rank's cosines and the squared norms).");

static PyObject *loops(PyObject *self, PyObject *unused)
{
    const char *scan_name, *dot_name;
    (void)engram_select_scan(scan_level(), &scan_name);
    (void)engram_select_dot(force_portable, &dot_name);
    return Py_BuildValue("{ssss}", "scan", scan_name, "dot", dot_name);
}

static PyMethodDef methods[] = {
    {"hamming", hamming, METH_VARARGS, hamming_doc},
    {"nearest", nearest, METH_VARARGS, nearest_doc},
    {"bm25_parts", bm25_parts, METH_VARARGS, bm25_parts_doc},
    {"cosines", cosines, METH_VARARGS, cosines_doc},
    {"self_dots", self_dots, METH_VARARGS, self_dots_doc},
    {"build_postings", engram_build_postings, METH_VARARGS, engram_build_postings_doc},
    {"postings_scores", engram_postings_scores, METH_VARARGS, engram_postings_scores_doc},
    {"ascii_spans", engram_ascii_spans, METH_VARARGS, engram_ascii_spans_doc},
    {"ascii_explain", engram_ascii_explain, METH_VARARGS, engram_ascii_explain_doc},
    {"match_terms", engram_match_terms, METH_VARARGS, engram_match_terms_doc},
    {"mostly_ascii_explain", engram_mostly_ascii_explain, METH_VARARGS, engram_mostly_ascii_explain_doc},
    {"word_presence", engram_word_presence, METH_VARARGS, engram_word_presence_doc},
    {"word_coverage", engram_word_coverage, METH_VARARGS, engram_word_coverage_doc},
    {"context_candidates", engram_context_candidates, METH_VARARGS, engram_context_candidates_doc},
    {"fuse", engram_fuse, METH_VARARGS, engram_fuse_doc},
    {"combine_scores", engram_combine_scores, METH_VARARGS, engram_combine_scores_doc},
    {"word_sums", engram_word_sums, METH_VARARGS, engram_word_sums_doc},
    {"select_top", engram_select_top, METH_VARARGS, engram_select_top_doc},
    {"postings_bounds", engram_postings_bounds, METH_VARARGS, engram_postings_bounds_doc},
    {"postings_top", engram_postings_top, METH_VARARGS, engram_postings_top_doc},
    {"rank_top", engram_rank_top, METH_VARARGS, engram_rank_top_doc},
    {"hybrid_rest", engram_hybrid_rest, METH_VARARGS, engram_hybrid_rest_doc},
    {"snippet_bounds", engram_snippet_bounds, METH_VARARGS, engram_snippet_bounds_doc},
    {"use_portable", use_portable, METH_O, use_portable_doc},
    {"use_avx512", use_avx512, METH_O, use_avx512_doc},
    {"use_avx2", use_avx2, METH_O, use_avx2_doc},
    {"loops", loops, METH_NOARGS, loops_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_kernels",
    .m_doc = "The engine's compiled inner loops: the coarse scan, the exact re-rank, the squared norms and the BM25 parts.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__kernels(void)
{
    return PyModule_Create(&module);
}
