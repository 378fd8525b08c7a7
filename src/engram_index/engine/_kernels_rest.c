/* A started hybrid search's rest in one call: the vector side's scan and exact re-rank, its best
 * candidates' BM25, and their fusion with the keyword side's (a module function of _kernels,
 * registered in _kernels.c).
 *
 * Why one call: a v5 search runs its memories' rest on the thread that made the query vector while
 * its own thread searches the chunks and takes their hits. In Python the rest was eight compiled
 * steps with Python between them, each step's return waiting for the GIL that the other thread's
 * Python held: taking the chunks' hits meanwhile made the memories' search longer, not the search
 * shorter (docs/design/supermemory.md). Here the GIL is let go once, for the whole rest. Each step
 * is the kernel the step-by-step path calls (nearest, cosines, rank_top, bm25_parts,
 * combine_scores, fuse), so the answers are the same bit for bit (tests/engine).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_kernels.h"

const char engram_hybrid_rest_doc[] =
"hybrid_rest(vector, counts, sums, keyword, fusion, out) -> int\n--\n\n"
"A hybrid search's rest once its query vector is known, as the step-by-step path computes it:\n"
"vector = (code, codes, excluded, pool, wanted, unit, vectors, inv_norms, n): the `wanted` rows of\n"
"codes nearest to code (uint8) by Hamming distance, excluded rows (uint8 per row, or None) skipped,\n"
"or the given pool (int64, ascending; None: scan) re-ranked by exact cosine with the unit query\n"
"(float64) over vectors (float16 rows) and inv_norms (float64), the best n kept (ties: the lower\n"
"ordinal); counts = (starts, lengths, doc_lengths, ids, tfs, qids, cols, idf, table, k1, b,\n"
"average, width): those n's BM25 parts (bm25_parts' arrays; width columns); sums = (plain, stems,\n"
"exacts, part_cols, part_weight, kw_count): their BM25 (combine_scores' columns; a lone candidate\n"
"is summed as in a call of two rows when kw_count > 0, as keyword_pass.finish scores it); keyword\n"
"= (kw_ords, kw_bm25): the keyword side's top (int64, float32); fusion = (live, method, alpha,\n"
"rrf_k, limit): fuse's. Writes the best min(limit, candidates) into out = (ords, fused, sims,\n"
"bm25, has_sim), each holding at least limit, and returns how many.";

enum { B_CODE, B_CODES, B_EXCLUDED, B_POOL, B_UNIT, B_VECTORS, B_NORMS, B_STARTS, B_LENGTHS, B_DOC_LENGTHS, B_IDS,
       B_TFS, B_QIDS, B_COLS, B_IDF, B_TABLE, B_PLAIN, B_STEMS, B_EXACTS, B_PARTS, B_KW_ORDS, B_KW_BM25, B_LIVE,
       B_OUT_ORDS, B_OUT_FUSED, B_OUT_SIMS, B_OUT_BM25, B_OUT_HAS_SIM, B_COUNT };

/* Failures found with the GIL released, raised once it is back. */
enum { REST_OK = 0, REST_NO_MEMORY, REST_BAD_ROW, REST_NAN };

static int in_range(const int64_t *values, Py_ssize_t n, int64_t below, const char *name)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (values[i] < 0 || values[i] >= below) {
            PyErr_Format(PyExc_ValueError, "%s holds %lld, outside [0, %lld)", name, (long long)values[i],
                         (long long)below);
            return -1;
        }
    return 0;
}

/* What the rest reads and writes, its buffers checked. */
typedef struct {
    const uint8_t *code, *codes, *excluded, *live;
    const int64_t *pool, *starts, *doc_lengths, *qids, *cols, *roles[4], *kw_ords;
    const double *unit, *inv_norms, *idf;
    const uint16_t *vectors, *tfs;
    const int32_t *lengths;
    const uint32_t *ids;
    const float *kw_bm25;
    int32_t *table;
    int64_t *out_ords;
    double *out_fused;
    float *out_sims, *out_bm25;
    uint8_t *out_has_sim;
    Py_ssize_t width_bytes, rows, pool_n, wanted, d, n, docs, arena, t, vocab, width, counts[4], kw_count, nk,
        size, limit;
    double k1, b, average, part_weight, alpha;
    int method, rrf_k;
} Rest;

/* The rest with the GIL released: how many were written into the outputs, or -1 with *failure set. */
static Py_ssize_t run(const Rest *r, engram_dot_fn dot, int level, int *failure)
{
    Py_ssize_t most = r->counts[0] > r->counts[1] ? r->counts[0] : r->counts[1];
    most = most > r->counts[3] ? most : r->counts[3];
    Py_ssize_t room = r->pool ? r->pool_n : r->wanted, n = r->n;
    int64_t *chosen = PyMem_RawMalloc(((size_t)room + 1) * sizeof(int64_t));
    float *sims = PyMem_RawMalloc(((size_t)room + 1) * sizeof(float));
    int64_t *vec_ords = PyMem_RawMalloc(((size_t)n + 1) * sizeof(int64_t));
    float *vec_sims = PyMem_RawMalloc(((size_t)n + 1) * sizeof(float)), *vec_bm25 = PyMem_RawMalloc(((size_t)n + 1) * sizeof(float));
    double *parts = PyMem_RawCalloc((size_t)n * (size_t)r->width + 1, sizeof(double));
    double *gathered = PyMem_RawMalloc(((size_t)most + 1) * sizeof(double));
    Py_ssize_t written = -1;
    *failure = REST_NO_MEMORY;
    if (!chosen || !sims || !vec_ords || !vec_sims || !vec_bm25 || !parts || !gathered)
        goto done;
    /* The vector side (SpaceIndex._vector_candidates): the pool, its cosines, the best n. */
    const int64_t *pool = r->pool;
    Py_ssize_t m = r->pool_n;
    if (pool == NULL) {
        m = engram_nearest_into(r->code, r->width_bytes, r->codes, r->rows, r->excluded, chosen, r->wanted, level);
        if (m < 0)
            goto done;
        pool = chosen;
    }
    engram_cosines_into(r->unit, r->d, r->vectors, r->inv_norms, pool, m, sims, dot);
    for (Py_ssize_t i = 0; i < m; i++)
        if (sims[i] != sims[i]) {
            *failure = REST_NAN;
            goto done;
        }
    Py_ssize_t nv = engram_rank_top_into(pool, sims, m, n, vec_ords, vec_sims);
    if (nv < 0)
        goto done;
    /* Their BM25 (keyword_pass.finish): the parts, then the sums. */
    if (engram_bm25_into(vec_ords, nv, r->starts, r->lengths, r->doc_lengths, r->docs, r->ids, r->tfs, r->arena,
                         r->qids, r->cols, r->idf, r->t, r->table, r->vocab, r->k1, r->b, r->average, parts,
                         r->width)) {
        *failure = REST_BAD_ROW;
        goto done;
    }
    engram_combine_into(parts, nv, r->width, r->roles, r->counts, r->part_weight,
                        nv == 1 && r->kw_count > 0 ? 2 : nv, gathered, vec_bm25);
    /* The fusion (SpaceIndex._fuse). */
    Py_ssize_t top = r->limit < nv + r->nk ? r->limit : nv + r->nk;
    written = engram_fuse_into(vec_ords, vec_sims, vec_bm25, nv, r->kw_ords, r->kw_bm25, r->nk, r->unit, r->vectors,
                               r->inv_norms, r->live, r->size, r->d, r->method, r->alpha, r->rrf_k, dot, r->out_ords,
                               r->out_fused, r->out_sims, r->out_bm25, r->out_has_sim, top);
    if (written >= 0)
        *failure = REST_OK;
done:
    PyMem_RawFree(chosen);
    PyMem_RawFree(sims);
    PyMem_RawFree(vec_ords);
    PyMem_RawFree(vec_sims);
    PyMem_RawFree(vec_bm25);
    PyMem_RawFree(parts);
    PyMem_RawFree(gathered);
    return written;
}

/* Check every buffer as the step-by-step kernels check theirs, and fill the Rest; -1 with an error set. */
static int checked(Py_buffer *v, Rest *r)
{
    static const struct { Py_ssize_t size; const char *formats; const char *name; } kinds[B_COUNT] = {
        {1, "Bb?", "code"}, {1, "Bb?", "codes"}, {1, "Bb?", "excluded"}, {8, "ql", "pool"}, {8, "d", "unit"},
        {2, "e", "vectors"}, {8, "d", "inv_norms"}, {8, "ql", "starts"}, {4, "i", "lengths"},
        {8, "ql", "doc_lengths"}, {4, "I", "ids"}, {2, "H", "tfs"}, {8, "ql", "qids"}, {8, "ql", "cols"},
        {8, "d", "idf"}, {4, "i", "table"}, {8, "ql", "plain"}, {8, "ql", "stems"}, {8, "ql", "exacts"},
        {8, "ql", "part_cols"}, {8, "ql", "kw_ords"}, {4, "f", "kw_bm25"}, {1, "?Bb", "live"},
        {8, "ql", "out_ords"}, {8, "d", "out_fused"}, {4, "f", "out_sims"}, {4, "f", "out_bm25"},
        {1, "?Bb", "out_has_sim"},
    };
    for (int i = 0; i < B_COUNT; i++)
        if (v[i].obj != NULL && engram_check_array(&v[i], kinds[i].size, kinds[i].formats, -1, kinds[i].name) < 0)
            return -1;
    r->width_bytes = v[B_CODE].len;
    if (r->width_bytes == 0 || r->width_bytes > 8191 || v[B_CODES].len % r->width_bytes != 0) {
        PyErr_SetString(PyExc_ValueError, "codes must be rows of the code's 1 to 8191 bytes");
        return -1;
    }
    r->rows = v[B_CODES].len / r->width_bytes;
    r->d = v[B_UNIT].len / 8;
    r->size = v[B_LIVE].len;
    if (r->d == 0 || (v[B_VECTORS].len / 2) % r->d != 0) {
        PyErr_SetString(PyExc_ValueError, "the query must have d > 0 components and vectors rows of d");
        return -1;
    }
    Py_ssize_t vector_rows = (v[B_VECTORS].len / 2) / r->d;
    if (r->size > vector_rows || r->size > v[B_NORMS].len / 8 || r->rows != r->size) {
        PyErr_SetString(PyExc_ValueError, "live, codes, vectors and inv_norms must cover the same rows");
        return -1;
    }
    if (v[B_EXCLUDED].obj != NULL && v[B_EXCLUDED].len != r->rows) {
        PyErr_Format(PyExc_ValueError, "excluded must hold one byte per row (%zd)", r->rows);
        return -1;
    }
    r->pool_n = v[B_POOL].obj ? v[B_POOL].len / 8 : 0;
    r->pool = v[B_POOL].obj ? v[B_POOL].buf : NULL;
    if (r->pool && in_range(r->pool, r->pool_n, r->size, "pool") < 0)
        return -1;
    for (Py_ssize_t i = 1; i < r->pool_n; i++)
        if (r->pool[i] <= r->pool[i - 1]) {
            PyErr_SetString(PyExc_ValueError, "the pool's ordinals must ascend");
            return -1;
        }
    if (r->wanted < 0 || r->n < 0 || r->limit < 0 || (r->method != 0 && r->method != 1)) {
        PyErr_SetString(PyExc_ValueError, "wanted, n and limit must not be negative, method 0 or 1");
        return -1;
    }
    r->docs = v[B_STARTS].len / 8;
    r->arena = v[B_IDS].len / 4;
    r->t = v[B_QIDS].len / 8;
    r->vocab = v[B_TABLE].len / 4;
    if (v[B_LENGTHS].len / 4 != r->docs || v[B_DOC_LENGTHS].len / 8 != r->docs || v[B_TFS].len / 2 != r->arena
        || v[B_COLS].len / 8 != r->t || v[B_IDF].len / 8 != r->t || r->width < 0) {
        PyErr_SetString(PyExc_ValueError, "the term counts' arrays do not agree in length");
        return -1;
    }
    if (in_range(v[B_QIDS].buf, r->t, r->vocab, "qids") < 0 || in_range(v[B_COLS].buf, r->t, r->width, "cols") < 0)
        return -1;
    static const int roles[4] = {B_PLAIN, B_STEMS, B_EXACTS, B_PARTS};
    for (int g = 0; g < 4; g++) {
        r->roles[g] = v[roles[g]].buf;
        r->counts[g] = v[roles[g]].len / 8;
        if (in_range(r->roles[g], r->counts[g], r->width, "a sum's column") < 0)
            return -1;
    }
    if (r->counts[1] != r->counts[2]) {
        PyErr_SetString(PyExc_ValueError, "stems and exacts must be aligned");
        return -1;
    }
    r->nk = v[B_KW_ORDS].len / 8;
    if (v[B_KW_BM25].len / 4 != r->nk) {
        PyErr_SetString(PyExc_ValueError, "kw_bm25 must hold one score per keyword ordinal");
        return -1;
    }
    if (in_range(v[B_KW_ORDS].buf, r->nk, (int64_t)1 << 43, "kw_ords") < 0)
        return -1;
    if (r->nk + (r->pool ? r->pool_n : r->wanted) >= ((Py_ssize_t)1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "at most 2**20 - 1 candidates");
        return -1;
    }
    Py_ssize_t outs[5] = {v[B_OUT_ORDS].len / 8, v[B_OUT_FUSED].len / 8, v[B_OUT_SIMS].len / 4,
                          v[B_OUT_BM25].len / 4, v[B_OUT_HAS_SIM].len};
    for (int i = 0; i < 5; i++)
        if (outs[i] < r->limit) {
            PyErr_SetString(PyExc_ValueError, "each output must hold at least limit values");
            return -1;
        }
    r->code = v[B_CODE].buf, r->codes = v[B_CODES].buf, r->excluded = v[B_EXCLUDED].obj ? v[B_EXCLUDED].buf : NULL;
    r->live = v[B_LIVE].buf, r->starts = v[B_STARTS].buf, r->doc_lengths = v[B_DOC_LENGTHS].buf;
    r->qids = v[B_QIDS].buf, r->cols = v[B_COLS].buf, r->kw_ords = v[B_KW_ORDS].buf, r->unit = v[B_UNIT].buf;
    r->inv_norms = v[B_NORMS].buf, r->idf = v[B_IDF].buf, r->vectors = v[B_VECTORS].buf, r->tfs = v[B_TFS].buf;
    r->lengths = v[B_LENGTHS].buf, r->ids = v[B_IDS].buf, r->kw_bm25 = v[B_KW_BM25].buf, r->table = v[B_TABLE].buf;
    r->out_ords = v[B_OUT_ORDS].buf, r->out_fused = v[B_OUT_FUSED].buf, r->out_sims = v[B_OUT_SIMS].buf;
    r->out_bm25 = v[B_OUT_BM25].buf, r->out_has_sim = v[B_OUT_HAS_SIM].buf;
    return 0;
}

PyObject *engram_hybrid_rest(PyObject *self, PyObject *args)
{
    PyObject *o[B_COUNT];
    Rest r;
    memset(&r, 0, sizeof(r));
    if (!PyArg_ParseTuple(args, "(OOOOnOOOn)(OOOOOOOOOdddn)(OOOOdn)(OO)(Oidin)(OOOOO):hybrid_rest", &o[B_CODE],
                          &o[B_CODES], &o[B_EXCLUDED], &o[B_POOL], &r.wanted, &o[B_UNIT], &o[B_VECTORS], &o[B_NORMS],
                          &r.n, &o[B_STARTS], &o[B_LENGTHS], &o[B_DOC_LENGTHS], &o[B_IDS], &o[B_TFS], &o[B_QIDS],
                          &o[B_COLS], &o[B_IDF], &o[B_TABLE], &r.k1, &r.b, &r.average, &r.width, &o[B_PLAIN],
                          &o[B_STEMS], &o[B_EXACTS], &o[B_PARTS], &r.part_weight, &r.kw_count, &o[B_KW_ORDS],
                          &o[B_KW_BM25], &o[B_LIVE], &r.method, &r.alpha, &r.rrf_k, &r.limit, &o[B_OUT_ORDS],
                          &o[B_OUT_FUSED], &o[B_OUT_SIMS], &o[B_OUT_BM25], &o[B_OUT_HAS_SIM]))
        return NULL;
    Py_buffer v[B_COUNT];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    for (int i = 0; i < B_COUNT; i++) {
        int writable = i == B_TABLE || i >= B_OUT_ORDS;
        if ((i == B_EXCLUDED || i == B_POOL) && o[i] == Py_None)
            continue;
        if (engram_get_buffer(o[i], &v[i], writable, "an argument") < 0)
            goto done;
    }
    if (checked(v, &r) < 0)
        goto done;
    const char *name;
    engram_dot_fn dot = engram_select_dot(engram_portable(), &name);
    int level = engram_scan_level(), failure;
    Py_ssize_t written;
    Py_BEGIN_ALLOW_THREADS
    written = run(&r, dot, level, &failure);
    Py_END_ALLOW_THREADS
    if (failure == REST_NO_MEMORY)
        PyErr_NoMemory();
    else if (failure == REST_BAD_ROW)
        PyErr_SetString(PyExc_ValueError, "a row lies outside the arena");
    else if (failure == REST_NAN)
        PyErr_SetString(PyExc_ValueError, "ordinals must ascend and cosines must not be NaN");
    else
        result = PyLong_FromSsize_t(written);
done:
    engram_release_all(v, B_COUNT);
    return result;
}
