/* The hybrid search's fusion: the union of both stages' candidates, the cosines of the keyword-only
 * ones, convex (z-scores) or RRF fusion, and the top of the ranking (a module function of _kernels,
 * registered in _kernels.c).
 *
 * Why: these steps were some twenty numpy calls over a few hundred candidates, whose fixed costs
 * were a fifth of a hybrid search (docs/design/engine.md). Every value is computed as
 * engine/fusion.py computes it, so the results are bit for bit the same: means and variances are
 * numpy's pairwise sums (blocks of 8 accumulators up to 128 values, halves beyond), products and
 * quotients in the same order, and no contraction into fused multiply-adds (setup.py turns it off).
 * The cosines run the re-rank's dot product, vectorised or portable (use_portable()).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_kernels.h"

const char engram_fuse_doc[] =
"fuse(vec_ords, vec_sims, vec_bm25, kw_ords, kw_bm25, query, vectors, inv_norms, live, method, alpha, rrf_k,\n"
"     out_ords, out_fused, out_sims, out_bm25, out_has_sim) -> int\n--\n\n"
"Fuse the vector candidates (int64 ordinals, float32 cosines and BM25) with the keyword ones (int64\n"
"ordinals, float32 BM25, which win for an ordinal in both): the union in ascending ordinal order,\n"
"the cosine of each keyword-only ordinal with the unit query (float64) where live (bool, one per\n"
"vector row) says it has a vector (else similarity 0 and has_sim 0), then convex fusion of z-scores\n"
"(method 0, weight alpha on the cosine) or RRF (method 1, k = rrf_k), as engine/fusion.py computes\n"
"them. Writes the best len(out_ords) by fused score (ties: the lower ordinal) into the outputs\n"
"(int64, float64, float32, float32, uint8) and returns how many.";

/* numpy's pairwise sum of n doubles (_kernels.h). */
double engram_pairwise_sum(const double *a, Py_ssize_t n)
{
    if (n < 8) {
        double res = 0.;
        for (Py_ssize_t i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        Py_ssize_t i;
        for (int j = 0; j < 8; j++)
            r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return engram_pairwise_sum(a, n2) + engram_pairwise_sum(a + n2, n - n2);
}

/* fusion.zscore in place: (v - mean) / std over the n values, all zeros when std is not positive;
 * scratch holds n doubles. */
static void zscore(double *v, Py_ssize_t n, double *scratch)
{
    double mean = engram_pairwise_sum(v, n) / (double)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        double x = v[i] - mean;
        scratch[i] = x * x;
    }
    double std = sqrt(engram_pairwise_sum(scratch, n) / (double)n);
    for (Py_ssize_t i = 0; i < n; i++)
        v[i] = std > 0 ? (v[i] - mean) / std : 0.0;
}

/* Sort n uint64 keys ascending (a bottom-up merge sort; work holds n more). */
static void sort_keys(uint64_t *keys, uint64_t *work, Py_ssize_t n)
{
    /* Runs of 8 by insertion first: most of the work for a few hundred keys. */
    for (Py_ssize_t from = 0; from < n; from += 8) {
        Py_ssize_t to = from + 8 < n ? from + 8 : n;
        for (Py_ssize_t i = from + 1; i < to; i++) {
            uint64_t k = keys[i];
            Py_ssize_t j = i;
            for (; j > from && keys[j - 1] > k; j--)
                keys[j] = keys[j - 1];
            keys[j] = k;
        }
    }
    uint64_t *src = keys, *dst = work;
    for (Py_ssize_t width = 8; width < n; width *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * width) {
            Py_ssize_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            Py_ssize_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                dst[o++] = src[b] < src[a] ? src[b++] : src[a++];
            while (a < mid)
                dst[o++] = src[a++];
            while (b < hi)
                dst[o++] = src[b++];
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != keys)
        memcpy(keys, src, (size_t)n * sizeof(uint64_t));
}

/* Reorder n distinct keys so that the first k (0 < k < n) are the k smallest, in no order; 0 when
 * the partitioning took too many rounds (keys chosen against it: the caller sorts them all). */
static int select_smallest(uint64_t *keys, Py_ssize_t n, Py_ssize_t k)
{
    Py_ssize_t lo = 0, hi = n - 1, target = k - 1;
    int rounds = 16;
    for (Py_ssize_t m = n; m > 1; m >>= 1)
        rounds += 2;
    while (hi > lo) {
        if (rounds-- == 0)
            return 0;
        /* Hoare's partition around the median of three: [lo, j] below the pivot or equal, [i, hi]
         * above or equal, and (distinct keys) the pivot alone between them. */
        uint64_t a = keys[lo], b = keys[lo + (hi - lo) / 2], c = keys[hi];
        uint64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (keys[i] < pivot)
                i++;
            while (keys[j] > pivot)
                j--;
            if (i <= j) {
                uint64_t t = keys[i];
                keys[i++] = keys[j];
                keys[j--] = t;
            }
        }
        if (target <= j)
            hi = j;
        else if (target >= i)
            lo = i;
        else
            break;
    }
    return 1;
}

/* A float32's bits turned so that unsigned order is the float's order (both zeros alike). */
static inline uint32_t ordered_bits(float f)
{
    if (f == 0.0f)
        f = 0.0f;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

/* fusion.ranks: 1-based ranks by descending float32 score, equal scores in order of position
 * (numpy's stable argsort of the negated scores). */
static void ranks(const float *scores, Py_ssize_t n, uint64_t *keys, uint64_t *work, int64_t *out)
{
    for (Py_ssize_t i = 0; i < n; i++)
        keys[i] = ((uint64_t)ordered_bits(-scores[i]) << 32) | (uint64_t)i;
    sort_keys(keys, work, n);
    for (Py_ssize_t r = 0; r < n; r++)
        out[keys[r] & 0xffffffffu] = r + 1;
}

/* Whether candidate i ranks before candidate j: the higher fused score, then the lower ordinal. */
static inline int before(const double *fused, const int64_t *ords, Py_ssize_t i, Py_ssize_t j)
{
    return fused[i] > fused[j] || (!(fused[i] < fused[j]) && ords[i] < ords[j]);
}

/* fuse's work, the GIL released by the caller: the outputs' count, or -1 when out of memory
 * (_kernels.h). live holds `size` rows; the vectors rows of d float16 components. */
Py_ssize_t engram_fuse_into(const int64_t *vec_ords, const float *vec_sims, const float *vec_bm25, Py_ssize_t nv,
                            const int64_t *kw_ords, const float *kw_bm25, Py_ssize_t nk, const double *q,
                            const uint16_t *vectors, const double *inv_norms, const uint8_t *live, Py_ssize_t size,
                            Py_ssize_t d, int method, double alpha, int rrf_k, engram_dot_fn dot, int64_t *out_ords,
                            double *out_fused, float *out_sims, float *out_bm25, uint8_t *out_has_sim, Py_ssize_t top)
{
    Py_ssize_t total = nv + nk;
    /* One block: the candidates by ordinal, their union's values, and the sorts' work space. */
    size_t bytes = (size_t)total * (sizeof(uint64_t) * 2 + sizeof(int64_t) * 4 + sizeof(double) * 4 + sizeof(float) * 2 + 1);
    void *memory = PyMem_RawMalloc(bytes ? bytes : 1);
    if (memory == NULL)
        return -1;
    uint64_t *keys = memory, *work = keys + total;
    int64_t *ords = (int64_t *)(work + total), *rank_s = ords + total, *rank_b = rank_s + total, *best = rank_b + total;
    double *zs = (double *)(rank_b + total), *zb = zs + total, *fused = zb + total, *scratch = fused + total;
    float *sims = (float *)(scratch + total), *bm25 = sims + total;
    uint8_t *has_sim = (uint8_t *)(bm25 + total);
    Py_ssize_t n = 0, written = 0;
    /* The vector candidates first, then the keyword ones: sorted by ordinal, the keyword entry of
     * an ordinal in both comes last, and its BM25 is the one kept (as the numpy version assigned). */
    for (Py_ssize_t i = 0; i < total; i++)
        keys[i] = ((uint64_t)(i < nv ? vec_ords[i] : kw_ords[i - nv]) << 20) | (uint64_t)i;
    sort_keys(keys, work, total);
    for (Py_ssize_t i = 0; i < total; i++) {
        Py_ssize_t at = (Py_ssize_t)(keys[i] & 0xfffff);
        int64_t o = at < nv ? vec_ords[at] : kw_ords[at - nv];
        if (n == 0 || ords[n - 1] != o) {
            ords[n] = o;
            sims[n] = NAN;
            has_sim[n] = 0;
            n++;
        }
        if (at < nv) {
            sims[n - 1] = vec_sims[at];
            has_sim[n - 1] = 1;
            bm25[n - 1] = vec_bm25[at];
        } else {
            bm25[n - 1] = kw_bm25[at - nv];
        }
    }
    /* The keyword-only candidates with a vector, whose rows are read in no useful order: each is
     * asked for AHEAD candidates before its turn (as the re-rank's cosines do). */
    Py_ssize_t missing = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!has_sim[i] && ords[i] < size && live[ords[i]])
            best[missing++] = i;
    for (Py_ssize_t m = 0; m < missing && m < 8; m++)
        engram_prefetch(vectors + ords[best[m]] * d, d * 2);
    for (Py_ssize_t m = 0; m < missing; m++) {
        if (m + 8 < missing) {
            engram_prefetch(vectors + ords[best[m + 8]] * d, d * 2);
            engram_prefetch(inv_norms + ords[best[m + 8]], 8);
        }
        Py_ssize_t i = best[m];
        int64_t o = ords[i];
        /* As the re-rank's cosines: one rounding to float32 of the scaled float64 sum, clipped. */
        float sim = (float)(dot(vectors + o * d, q, d) * inv_norms[o]);
        sims[i] = sim > 1.0f ? 1.0f : (sim < -1.0f ? -1.0f : sim);
        has_sim[i] = 1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!has_sim[i])
            sims[i] = 0.0f; /* no vector: ranked as if orthogonal, reported without a similarity */
    if (n > 0) {
        if (method == 0) {
            for (Py_ssize_t i = 0; i < n; i++) {
                zs[i] = (double)sims[i];
                zb[i] = (double)bm25[i];
            }
            zscore(zs, n, scratch);
            zscore(zb, n, scratch);
            double rest = 1.0 - alpha;
            for (Py_ssize_t i = 0; i < n; i++) {
                double a = alpha * zs[i], b = rest * zb[i];
                fused[i] = a + b;
            }
        } else {
            ranks(sims, n, keys, work, rank_s);
            float *matched = (float *)scratch; /* n floats fit in n doubles */
            for (Py_ssize_t i = 0; i < n; i++)
                matched[i] = bm25[i] > 0 ? bm25[i] : -INFINITY;
            ranks(matched, n, keys, work, rank_b);
            for (Py_ssize_t i = 0; i < n; i++) {
                double from_vector = 1.0 / (double)(rrf_k + rank_s[i]);
                fused[i] = from_vector + (bm25[i] > 0 ? 1.0 / (double)(rrf_k + rank_b[i]) : 0.0);
            }
        }
        /* The best by fused score, ties by ordinal (the search's _order), kept in order by insertion. */
        Py_ssize_t kept = 0, want = n < top ? n : top;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (kept == want && !before(fused, ords, i, best[kept - 1]))
                continue;
            Py_ssize_t j = kept < want ? kept++ : kept - 1;
            for (; j > 0 && before(fused, ords, i, best[j - 1]); j--)
                best[j] = best[j - 1];
            best[j] = i;
        }
        for (Py_ssize_t r = 0; r < kept; r++) {
            Py_ssize_t i = best[r];
            out_ords[r] = ords[i];
            out_fused[r] = fused[i];
            out_sims[r] = sims[i];
            out_bm25[r] = bm25[i];
            out_has_sim[r] = has_sim[i];
        }
        written = kept;
    }
    PyMem_RawFree(memory);
    return written;
}

PyObject *engram_fuse(PyObject *self, PyObject *args)
{
    PyObject *objs[16];
    int method, rrf_k;
    double alpha;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOidiOOOOO:fuse", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6], &objs[7], &objs[8], &method, &alpha, &rrf_k, &objs[9], &objs[10],
                          &objs[11], &objs[12], &objs[13]))
        return NULL;
    static const char *names[14] = {"vec_ords", "vec_sims", "vec_bm25", "kw_ords", "kw_bm25", "query", "vectors",
                                    "inv_norms", "live", "out_ords", "out_fused", "out_sims", "out_bm25",
                                    "out_has_sim"};
    Py_buffer v[14];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    if (engram_get_buffers(objs, v, 14, 9, names) < 0)
        goto done;
    Py_ssize_t nv = v[0].len / 8, nk = v[3].len / 8, d = v[5].len / 8, top = v[9].len / 8;
    if (engram_check_array(&v[0], 8, "ql", -1, "vec_ords") < 0 || engram_check_array(&v[1], 4, "f", nv, "vec_sims") < 0
        || engram_check_array(&v[2], 4, "f", nv, "vec_bm25") < 0 || engram_check_array(&v[3], 8, "ql", -1, "kw_ords") < 0
        || engram_check_array(&v[4], 4, "f", nk, "kw_bm25") < 0 || engram_check_array(&v[5], 8, "d", -1, "query") < 0
        || engram_check_array(&v[6], 2, "e", -1, "vectors") < 0 || engram_check_array(&v[7], 8, "d", -1, "inv_norms") < 0
        || engram_check_array(&v[8], 1, "?Bb", -1, "live") < 0 || engram_check_array(&v[9], 8, "ql", -1, "out_ords") < 0
        || engram_check_array(&v[10], 8, "d", top, "out_fused") < 0 || engram_check_array(&v[11], 4, "f", top, "out_sims") < 0
        || engram_check_array(&v[12], 4, "f", top, "out_bm25") < 0 || engram_check_array(&v[13], 1, "?Bb", top, "out_has_sim") < 0)
        goto done;
    if (method != 0 && method != 1) {
        PyErr_SetString(PyExc_ValueError, "method must be 0 (convex) or 1 (rrf)");
        goto done;
    }
    if (d == 0 || (v[6].len / 2) % d != 0) {
        PyErr_SetString(PyExc_ValueError, "the query must have d > 0 components and vectors rows of d");
        goto done;
    }
    Py_ssize_t rows = (v[6].len / 2) / d, size = v[8].len;
    if (size > rows || size > v[7].len / 8) {
        PyErr_SetString(PyExc_ValueError, "live must not cover more rows than vectors and inv_norms hold");
        goto done;
    }
    const int64_t *vec_ords = v[0].buf, *kw_ords = v[3].buf;
    for (Py_ssize_t i = 0; i < nv; i++)
        if (vec_ords[i] < 0 || vec_ords[i] >= size) {
            PyErr_Format(PyExc_ValueError, "vector candidate %lld has no vector", (long long)vec_ords[i]);
            goto done;
        }
    for (Py_ssize_t i = 0; i < nk; i++)
        if (kw_ords[i] < 0 || kw_ords[i] >= ((int64_t)1 << 43)) {
            PyErr_SetString(PyExc_ValueError, "ordinals must be non-negative and below 2**43");
            goto done;
        }
    Py_ssize_t total = nv + nk;
    if (total >= ((Py_ssize_t)1 << 20)) { /* positions are packed into 20 bits beside the ordinals */
        PyErr_SetString(PyExc_ValueError, "at most 2**20 - 1 candidates");
        goto done;
    }
    const char *name;
    engram_dot_fn dot = engram_select_dot(engram_portable(), &name);
    Py_ssize_t written;
    Py_BEGIN_ALLOW_THREADS
    written = engram_fuse_into(vec_ords, v[1].buf, v[2].buf, nv, kw_ords, v[4].buf, nk, v[5].buf, v[6].buf, v[7].buf,
                               v[8].buf, size, d, method, alpha, rrf_k, dot, v[9].buf, v[10].buf, v[11].buf,
                               v[12].buf, v[13].buf, top);
    Py_END_ALLOW_THREADS
    if (written < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyLong_FromSsize_t(written);
done:
    engram_release_all(v, 14);
    return result;
}

/* rank_top's work, the GIL released by the caller: how many were written, or -1 when out of memory
 * (_kernels.h). */
Py_ssize_t engram_rank_top_into(const int64_t *ords, const float *sims, Py_ssize_t n, Py_ssize_t top,
                                int64_t *out_ords, float *out_sims)
{
    uint64_t *keys = PyMem_RawMalloc(((size_t)n * 2 + 1) * sizeof(uint64_t));
    if (keys == NULL)
        return -1;
    Py_ssize_t written = n < top ? n : top;
    /* The position is the low half of the key: the ordinals ascend, so equal cosines order by
     * ordinal, and each key leads back to its cosine as given (its sign of zero included). */
    for (Py_ssize_t i = 0; i < n; i++)
        keys[i] = ((uint64_t)ordered_bits(-sims[i]) << 32) | (uint64_t)i;
    /* Only the best `written` are wanted in order: picked first (keys are distinct, so which they
     * are and their order are the whole sort's), a fifth of sorting all of a re-rank's 1,032. */
    if (written > 0 && written < n && select_smallest(keys, n, written))
        sort_keys(keys, keys + n, written);
    else
        sort_keys(keys, keys + n, n);
    for (Py_ssize_t r = 0; r < written; r++) {
        Py_ssize_t at = (Py_ssize_t)(keys[r] & 0xffffffffu);
        out_ords[r] = ords[at];
        out_sims[r] = sims[at];
    }
    PyMem_RawFree(keys);
    return written;
}

const char engram_rank_top_doc[] =
"rank_top(ords, sims, out_ords, out_sims) -> int\n--\n\n"
"Write the best len(out_ords) of the ordinals (int64, ascending, distinct) by descending float32\n"
"cosine, ties by the lower ordinal (numpy's lexsort of the ordinals and the negated cosines), into\n"
"out_ords (int64) and out_sims (float32); return how many.";

PyObject *engram_rank_top(PyObject *self, PyObject *args)
{
    PyObject *objs[4];
    if (!PyArg_ParseTuple(args, "OOOO:rank_top", &objs[0], &objs[1], &objs[2], &objs[3]))
        return NULL;
    static const char *names[4] = {"ords", "sims", "out_ords", "out_sims"};
    Py_buffer v[4];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    if (engram_get_buffers(objs, v, 4, 2, names) < 0)
        goto done;
    Py_ssize_t n = v[0].len / 8, top = v[2].len / 8;
    if (engram_check_array(&v[0], 8, "ql", -1, "ords") < 0 || engram_check_array(&v[1], 4, "f", n, "sims") < 0
        || engram_check_array(&v[2], 8, "ql", -1, "out_ords") < 0 || engram_check_array(&v[3], 4, "f", top, "out_sims") < 0)
        goto done;
    const int64_t *ords = v[0].buf;
    const float *sims = v[1].buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if ((i > 0 && ords[i] <= ords[i - 1]) || sims[i] != sims[i] || n > (Py_ssize_t)UINT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "ordinals must ascend and cosines must not be NaN");
            goto done;
        }
    int64_t *out_ords = v[2].buf;
    float *out_sims = v[3].buf;
    Py_ssize_t written;
    Py_BEGIN_ALLOW_THREADS
    written = engram_rank_top_into(ords, sims, n, top, out_ords, out_sims);
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
