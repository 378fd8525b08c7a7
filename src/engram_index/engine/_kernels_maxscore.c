/* The exact keyword top-k over the term counts' postings with MaxScore pruning (module functions of
 * _kernels, registered in _kernels.c).
 *
 * Why: scoring every holder of every query term (postings_scores) spends most of a keyword search
 * on the commonest words, whose holders can add little. Each term's postings know the most any
 * holder can get from it (its largest count in its shortest holder), so once the top-k's k-th
 * partial score exceeds what the terms not yet scored could add together, no document outside the
 * ones already met can reach the top-k: the rest are added only to those (looked up by binary
 * search in the sorted postings when few), and a document whose partial score plus what remains
 * cannot reach the k-th is dropped. Scores only grow, so the k-th partial score is a lower bound of
 * the final one and what is dropped could not have been selected (docs/design/engine.md). Scalar
 * loops (no vectorised variant, so nothing to twin); the GIL is released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_kernels.h"

/* Bounds are compared with this much slack, so that rounding in a sum never drops a document. */
#define SLACK 1e-12

const char engram_postings_bounds_doc[] =
"postings_bounds(post_starts, post_ords, post_tfs, doc_lengths, k1, b, average, max_part)\n--\n\n"
"Per term of the postings (post_starts: int64, one more than the vocabulary; post_ords int32,\n"
"post_tfs uint16), the largest tf / (tf + k1 (1 - b + b len / average)) over its holders (len:\n"
"doc_lengths, int64 per ordinal) into max_part (float64); 0 for a term without holders.";

PyObject *engram_postings_bounds(PyObject *self, PyObject *args)
{
    PyObject *objs[5];
    double k1, b, average;
    if (!PyArg_ParseTuple(args, "OOOOdddO:postings_bounds", &objs[0], &objs[1], &objs[2], &objs[3], &k1, &b, &average,
                          &objs[4]))
        return NULL;
    static const char *names[5] = {"post_starts", "post_ords", "post_tfs", "doc_lengths", "max_part"};
    Py_buffer v[5];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    if (engram_get_buffers(objs, v, 5, 4, names) < 0)
        goto done;
    Py_ssize_t vocab = v[0].len / 8 - 1, total = v[1].len / 4, docs = v[3].len / 8;
    if (engram_check_array(&v[0], 8, "ql", -1, "post_starts") < 0 || engram_check_array(&v[1], 4, "i", -1, "post_ords") < 0
        || engram_check_array(&v[2], 2, "H", total, "post_tfs") < 0 || engram_check_array(&v[3], 8, "ql", -1, "doc_lengths") < 0
        || engram_check_array(&v[4], 8, "d", vocab, "max_part") < 0)
        goto done;
    if (vocab < 0) {
        PyErr_SetString(PyExc_ValueError, "post_starts must hold one more value than the vocabulary");
        goto done;
    }
    const int64_t *starts = v[0].buf, *doc_lengths = v[3].buf;
    const int32_t *ords = v[1].buf;
    const uint16_t *tfs = v[2].buf;
    double *max_part = v[4].buf;
    for (Py_ssize_t t = 0; t < vocab; t++)
        if (starts[t] < 0 || starts[t] > starts[t + 1] || starts[t + 1] > total) {
            PyErr_SetString(PyExc_ValueError, "post_starts must ascend within the postings");
            goto done;
        }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < vocab; t++) {
        double most = 0.0;
        for (int64_t p = starts[t]; p < starts[t + 1]; p++) {
            int32_t d = ords[p];
            /* An ordinal beyond the lengths is never scored: it counts as the shortest. */
            double len = d >= 0 && d < docs && doc_lengths[d] > 0 ? (double)doc_lengths[d] : 0.0;
            double tf = (double)tfs[p];
            double norm = k1 * (average > 0 ? 1.0 - b + b * len / average : 1.0 - b);
            double part = tf > 0 ? tf / (tf + norm) : 0.0;
            if (part > most)
                most = part;
        }
        max_part[t] = most;
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    engram_release_all(v, 5);
    return result;
}

const char engram_postings_top_doc[] =
"postings_top(post_starts, post_ords, post_tfs, doc_lengths, max_part, bound_average, tids, kinds,\n"
"             groups, weights, idf, k1, b, average, stale, allowed, k, margin, acc, mark, touched, values,\n"
"             post_lengths=None, covered_by=None, df=None, live=0)\n"
"-> (n, skipped, unread)\n--\n\n"
"postings_scores' scoring, pruned for a top k (k <= 0: not pruned): every document whose score\n"
"is at least the k-th largest less margin x its magnitude is among the n written to touched and\n"
"values, with its whole score; others may be left out. A word's stem and exact form (one group)\n"
"are taken together, in their order. max_part is postings_bounds' at bound_average (the lengths'\n"
"average when they were inverted). skipped: postings entries not read (0 when nothing was pruned).\n"
"post_lengths (uint16, one per entry, or None): each entry's doc_lengths value, read in its place.\n"
"covered_by (int32, one per term, or None): per exact form's term, the stem term known to cover it\n"
"(every holder not stale holds it), or -1; an exact form whose group's one stem covers it is left\n"
"out (unread: its entries), the stem then made plain when no exact form of its group is left, and\n"
"an exact form read whole whose every holder the stem marked is written there. idf may be None\n"
"when df (int64, one per term) is given: each term's idf from df over live documents.";

/* The k-th largest of acc over n ordinals (k <= n), with a min-heap of k. */
static double kth_of(const double *acc, const int64_t *ords, Py_ssize_t n, Py_ssize_t k, double *heap)
{
    for (Py_ssize_t i = 0; i < k; i++)
        heap[i] = acc[ords[i]];
    for (Py_ssize_t i = k / 2; i-- > 0;)
        engram_sift(heap, k, i);
    for (Py_ssize_t i = k; i < n; i++) {
        double x = acc[ords[i]];
        if (x > heap[0]) {
            heap[0] = x;
            engram_sift(heap, k, 0);
        }
    }
    return heap[0];
}

/* Where d sits in the ascending ords[lo, hi), or -1. */
static int64_t find(const int32_t *ords, int64_t lo, int64_t hi, int32_t d)
{
    int64_t end = hi;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ords[mid] < d)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < end && ords[lo] == d ? lo : -1;
}

/* A holder's BM25 part in a column: scale x tf / (tf + norm), a norm being norm0 + norm1 x length.
 * The one form of it both phases compute, so that their sums are the same doubles. */
static inline double bm25_part(uint16_t tf_count, double length, double scale, double norm0, double norm1)
{
    double tf = (double)tf_count;
    return scale * tf / (tf + (norm0 + norm1 * length));
}

/* Phase 2's step for one candidate holding a column: its BM25 part added to acc[d], and after a
 * stem (kind 1) its mark set, so that the group's exact forms (kind 2) add nothing there. */
static inline void add_part(double *acc, int32_t *mark, int64_t d, uint16_t tf_count, int64_t length, double scale,
                            double norm0, double norm1, int64_t kind, int32_t found_mark)
{
    acc[d] += bm25_part(tf_count, (double)length, scale, norm0, norm1);
    if (kind == 1)
        mark[d] = found_mark;
}

/* Phase 1 works out its entries' parts this many at a time, ahead of adding them: a loop of the
 * same arithmetic alone, which the compiler does two to an SSE2 instruction (one at a time, the
 * division and its wait were a third of the pass's samples; 0.79x the pass's CPU on an AVX2 AMD
 * EPYC, bench/ab_kernels.py). The same operations in the same order: the same doubles. */
#define PARTS_BLOCK 256

static void block_parts(const uint16_t *tfs, const uint16_t *lengths, int64_t count, double scale, double norm0,
                        double norm1, double *out)
{
    for (int64_t i = 0; i < count; i++)
        out[i] = bm25_part(tfs[i], (double)lengths[i], scale, norm0, norm1);
}

typedef struct {
    double bound;   /* the most a document can get from the unit */
    int64_t length; /* its postings' entries */
    Py_ssize_t first, count; /* its columns: cols[first .. first + count) */
    Py_ssize_t id; /* its number before the sort (unit_of's) */
} Unit;

PyObject *engram_postings_top(PyObject *self, PyObject *args)
{
    PyObject *objs[20];
    double k1, b, average, margin, bound_average, live = 0.0;
    Py_ssize_t k;
    objs[17] = objs[18] = objs[19] = Py_None;
    if (!PyArg_ParseTuple(args, "OOOOOdOOOOOdddOOndOOOO|OOOd:postings_top", &objs[0], &objs[1], &objs[2], &objs[3],
                          &objs[4], &bound_average, &objs[6], &objs[7], &objs[8], &objs[9], &objs[10], &k1, &b, &average,
                          &objs[11], &objs[12], &k, &margin, &objs[13], &objs[14], &objs[15], &objs[16], &objs[17], &objs[18], &objs[19], &live))
        return NULL;
    static const char *names[20] = {"post_starts", "post_ords", "post_tfs", "doc_lengths", "max_part", "",
                                    "tids", "kinds", "groups", "weights", "idf", "stale", "allowed", "acc",
                                    "mark", "touched", "values", "post_lengths", "covered_by", "df"};
    Py_buffer v[20];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    Unit *units = NULL;
    Py_ssize_t *cols = NULL, *unit_of = NULL;
    EngramColumns own = {0};
    double *rest = NULL, *heap = NULL;
    int64_t *cands = NULL;
    for (int i = 0; i < 17; i++) {
        if (i == 5 || i == 11 || i == 12 || (i == 10 && objs[i] == Py_None && objs[19] != Py_None))
            continue;
        if (engram_get_buffer(objs[i], &v[i], i >= 13, names[i]) < 0)
            goto done;
    }
    Py_ssize_t stale_n = -1, allowed_n = -1;
    for (int i = 11; i <= 12; i++) {
        if (objs[i] == Py_None)
            continue;
        if (engram_get_buffer(objs[i], &v[i], 0, names[i]) < 0 || engram_check_array(&v[i], 1, "?Bb", -1, names[i]) < 0)
            goto done;
        *(i == 11 ? &stale_n : &allowed_n) = v[i].len;
    }
    if (objs[17] != Py_None && engram_get_buffer(objs[17], &v[17], 0, names[17]) < 0)
        goto done;
    if (objs[18] != Py_None && engram_get_buffer(objs[18], &v[18], 1, names[18]) < 0)
        goto done;
    if (objs[19] != Py_None && engram_get_buffer(objs[19], &v[19], 0, names[19]) < 0)
        goto done;
    Py_ssize_t vocab = v[0].len / 8 - 1, total = v[1].len / 4, docs = v[3].len / 8, t = v[6].len / 8, m = v[13].len / 8;
    if (engram_check_array(&v[0], 8, "ql", -1, "post_starts") < 0 || engram_check_array(&v[1], 4, "i", -1, "post_ords") < 0
        || engram_check_array(&v[2], 2, "H", total, "post_tfs") < 0 || engram_check_array(&v[3], 8, "ql", -1, "doc_lengths") < 0
        || engram_check_array(&v[4], 8, "d", vocab, "max_part") < 0
        || engram_check_array(&v[6], 8, "ql", -1, "tids") < 0 || engram_check_array(&v[7], 8, "ql", t, "kinds") < 0
        || engram_check_array(&v[8], 8, "ql", t, "groups") < 0 || engram_check_array(&v[9], 8, "d", t, "weights") < 0
        || (v[10].obj != NULL && engram_check_array(&v[10], 8, "d", t, "idf") < 0)
        || engram_check_array(&v[13], 8, "d", -1, "acc") < 0
        || engram_check_array(&v[14], 4, "i", m, "mark") < 0 || engram_check_array(&v[15], 8, "ql", m, "touched") < 0
        || engram_check_array(&v[16], 8, "d", m, "values") < 0
        || (v[17].obj != NULL && engram_check_array(&v[17], 2, "H", total, "post_lengths") < 0)
        || (v[18].obj != NULL && engram_check_array(&v[18], 4, "i", vocab, "covered_by") < 0)
        || (v[19].obj != NULL && engram_check_array(&v[19], 8, "ql", -1, "df") < 0))
        goto done;
    if (vocab < 0) {
        PyErr_SetString(PyExc_ValueError, "post_starts must hold one more value than the vocabulary");
        goto done;
    }
    if (!(margin >= 0 && margin < 1)) {
        PyErr_SetString(PyExc_ValueError, "margin must be in [0, 1)");
        goto done;
    }
    const int64_t *post_starts = v[0].buf, *doc_lengths = v[3].buf, *tids = v[6].buf;
    const int64_t *kinds = v[7].buf, *groups = v[8].buf, *df = v[19].buf;
    const int32_t *post_ords = v[1].buf;
    const uint16_t *post_tfs = v[2].buf;
    /* Each entry's holder's length beside it, read with the entry: the holders' own lengths, read
     * where they lie, cost a cache miss an entry as the accumulators do (the pass's time). */
    const uint16_t *post_lengths = v[17].obj != NULL ? v[17].buf : NULL;
    const double *max_part = v[4].buf, *weights = v[9].buf, *idf = v[10].buf;
    const uint8_t *stale = v[11].buf, *allowed = v[12].buf;
    int32_t *covered_by = v[18].obj != NULL ? v[18].buf : NULL;
    /* From here on the columns as read: checked, covered exact forms out, their stems plain, idf worked
     * out (_kernels_columns.c). */
    if (engram_columns_make(&own, t, tids, kinds, groups, weights, idf, df, v[19].len / 8, live, covered_by,
                            post_starts, vocab, total) < 0)
        goto done;
    tids = own.tids;
    kinds = own.kinds;
    idf = own.idf;
    const Py_ssize_t *stem_of = own.stem_of;
    int stems = 0; /* whether a stem (kind 1) is asked: only then does phase 1 mark documents */
    for (Py_ssize_t q = 0; q < t; q++)
        stems |= tids[q] >= 0 && kinds[q] == 1;
    units = PyMem_RawMalloc(((size_t)t + 1) * sizeof(Unit));
    cols = PyMem_RawMalloc(((size_t)t + 1) * sizeof(Py_ssize_t));
    unit_of = PyMem_RawMalloc(((size_t)t + 1) * sizeof(Py_ssize_t));
    rest = PyMem_RawMalloc(((size_t)t + 2) * sizeof(double));
    heap = PyMem_RawMalloc(((size_t)(k > 0 ? k : 1)) * sizeof(double));
    if (units == NULL || cols == NULL || unit_of == NULL || rest == NULL || heap == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* The units: a present column of kind 0 alone; a group's present columns of kinds 1 and 2 together. */
    Py_ssize_t nu = 0;
    for (Py_ssize_t q = 0; q < t; q++) {
        unit_of[q] = -1;
        if (tids[q] < 0)
            continue;
        if (kinds[q] != 0)
            for (Py_ssize_t r = 0; r < q; r++)
                if (unit_of[r] >= 0 && kinds[r] != 0 && groups[r] == groups[q]) {
                    unit_of[q] = unit_of[r];
                    break;
                }
        if (unit_of[q] < 0)
            unit_of[q] = nu++;
    }
    int pruning = k > 0 && k1 >= 0 && b >= 0 && b <= 1 && average > 0 && bound_average >= 0;
    /* The bounds were taken at the average of their inversion: with a larger average now, every
     * norm is at least bound_average / average of its old value, and each part at most
     * average / bound_average times its old one (tf / (tf + c n) <= tf / (tf + n) / c). */
    double widen = 1.0;
    if (average > 0 && bound_average > 0 && average > bound_average)
        widen = average / bound_average;
    else if (average > 0 && !(bound_average > 0))
        pruning = 0;
    for (Py_ssize_t u = 0; u < nu; u++) {
        double sum1 = 0, sum2 = 0;
        Py_ssize_t last1 = -1, first2 = t;
        units[u].length = 0;
        units[u].count = 0;
        for (Py_ssize_t q = 0; q < t; q++) {
            if (unit_of[q] != u)
                continue;
            double most = weights[q] * idf[q] * (k1 + 1.0) * max_part[tids[q]] * widen;
            if (!isfinite(most))
                pruning = 0;
            if (kinds[q] == 2) {
                sum2 += most;
                first2 = q < first2 ? q : first2;
            } else {
                sum1 += most;
                last1 = q;
            }
            units[u].length += post_starts[tids[q] + 1] - post_starts[tids[q]];
        }
        /* A stem found marks the document, so the exact forms after it add nothing there. */
        units[u].bound = last1 < first2 && sum2 > 0 && sum1 > 0 ? (sum1 > sum2 ? sum1 : sum2) : sum1 + sum2;
    }
    /* The biggest bounds first (stable): their holders are the candidates; the small ones after. */
    for (Py_ssize_t u = 0; u < nu; u++)
        units[u].id = u;
    for (Py_ssize_t u = 1; u < nu; u++) {
        Unit x = units[u];
        Py_ssize_t j = u;
        for (; j > 0 && units[j - 1].bound < x.bound; j--)
            units[j] = units[j - 1];
        units[j] = x;
    }
    Py_ssize_t laid = 0;
    for (Py_ssize_t s = 0; s < nu; s++) {
        units[s].first = laid;
        for (Py_ssize_t q = 0; q < t; q++)
            if (unit_of[q] == units[s].id)
                cols[laid++] = q;
        units[s].count = laid - units[s].first;
    }
    /* rest[s]: the most the units from s on can add together. */
    rest[nu] = 0.0;
    for (Py_ssize_t s = nu; s-- > 0;)
        rest[s] = rest[s + 1] + units[s].bound;

    double *acc = v[13].buf, *values = v[16].buf;
    int32_t *mark = v[14].buf;
    int64_t *touched = v[15].buf;
    Py_ssize_t n = 0, kept = -1;
    long long skipped = 0;
    int no_memory = 0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t s = 0;
    /* A norm is norm0 + norm1 x length: a product where a quotient was (an entry's one division
     * left is its part's), within rounding of the rows' scores, which the margin covers. */
    double norm0 = k1 * (1.0 - b), norm1 = average > 0 ? k1 * b / average : 0.0;
    double cut = 0.0;
    /* Phase 1: every holder of the units with the biggest bounds, until the rest cannot lift a
     * document that none of them holds into the top k. Checked before a unit long enough to be
     * worth the k-th's cost (a pass over the documents met so far). */
    /* left[s]: the postings entries of the units from s on (what pruning there could save). */
    int64_t left = 0;
    double last_kth = 0.0;
    Py_ssize_t checked = -1;
    for (Py_ssize_t u = 0; u < nu; u++)
        left += units[u].length;
    for (; s < nu; left -= units[s].length, s++) {
        /* Worth a check when what is left to read is long beside the documents met, and when the
         * units scored so far could give a document more than the rest (else nothing is cut). */
        if (pruning && s > 0 && n >= k && left >= 4 * (int64_t)n && rest[0] - rest[s] > rest[s]
            && (checked < 0 || (last_kth + rest[checked] - rest[s]) * (1.0 - margin) > rest[s])) {
            /* The k-th of the first documents met is a lower bound of the k-th of all (any subset's
             * is), and the first met hold the rarest terms, the likeliest best: a cheap check. */
            Py_ssize_t look = n < 2 * k + 512 ? n : 2 * k + 512;
            double kth = kth_of(acc, touched, look, k, heap);
            /* Until then no document gains more than the bounds of the units scored since: the
             * k-th cannot pass rest[s] sooner, and is not computed again before it could. */
            last_kth = kth;
            checked = s;
            cut = (kth - margin * fabs(kth)) * (1.0 - SLACK);
            if (rest[s] * (1.0 + SLACK) < cut)
                break;
        }
        for (Py_ssize_t c = units[s].first; c < units[s].first + units[s].count; c++) {
            Py_ssize_t q = cols[c];
            double scale = weights[q] * idf[q] * (k1 + 1.0);
            int64_t kind = kinds[q];
            int32_t group = (int32_t)groups[q];
            int64_t lone = 0; /* an exact form's holders its stem did not mark (before the filter) */
            double parts[PARTS_BLOCK];
            for (int64_t from = post_starts[tids[q]], stop = post_starts[tids[q] + 1]; from < stop; from += PARTS_BLOCK) {
                int64_t till = stop - from < PARTS_BLOCK ? stop : from + PARTS_BLOCK;
                if (post_lengths != NULL)
                    block_parts(post_tfs + from, post_lengths + from, till - from, scale, norm0, norm1, parts);
                for (int64_t p = from; p < till; p++) {
                    int32_t d = post_ords[p];
                    if (d < 0 || d >= m || d >= docs)
                        continue;
                    if (stale_n >= 0 && d < stale_n && stale[d])
                        continue;
                    if (kind == 2) {
                        if (mark[d] == group)
                            continue;
                        lone++;
                    }
                    if (allowed_n >= 0 && (d >= allowed_n || !allowed[d]))
                        continue;
                    double part = post_lengths != NULL ? parts[p - from]
                                                       : bm25_part(post_tfs[p], (double)doc_lengths[d], scale, norm0, norm1);
                    /* Met for the first time: noted without a branch (which half the holders take). */
                    if (n < m)
                        touched[n] = d;
                    n += acc[d] == 0.0;
                    acc[d] += part;
                    if (kind == 1)
                        mark[d] = group;
                }
            }
            /* Read whole, every holder marked: the stem covers this form in these postings. */
            if (kind == 2 && covered_by != NULL && lone == 0 && stem_of[q] >= 0 && tids[stem_of[q]] >= 0)
                covered_by[tids[q]] = (int32_t)tids[stem_of[q]];
        }
    }
    if (s < nu) {
        /* Phase 2: only the documents met can still reach the top k. A candidate's mark is
         * negative (-1, or -2 - group once the group's stem is found in it); others' are 0. */
        cands = PyMem_RawMalloc((size_t)n * sizeof(int64_t));
        if (cands == NULL)
            no_memory = 1;
        else {
            kept = 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                int64_t d = touched[i];
                if (acc[d] + rest[s] * (1.0 + SLACK) >= cut) {
                    cands[kept++] = d;
                    mark[d] = -1;
                } else
                    mark[d] = 0;
            }
            for (Py_ssize_t first = s; s < nu; s++) {
                if (s > first) {
                    /* The candidates' scores grew: a higher k-th, and less left to add. */
                    if (kept >= k) {
                        double kth = kth_of(acc, cands, kept, k, heap);
                        double now = (kth - margin * fabs(kth)) * (1.0 - SLACK);
                        cut = now > cut ? now : cut;
                    }
                    Py_ssize_t still = 0;
                    for (Py_ssize_t i = 0; i < kept; i++) {
                        int64_t d = cands[i];
                        if (acc[d] + rest[s] * (1.0 + SLACK) >= cut)
                            cands[still++] = d;
                        else
                            mark[d] = 0;
                    }
                    kept = still;
                }
                for (Py_ssize_t c = units[s].first; c < units[s].first + units[s].count; c++) {
                    Py_ssize_t q = cols[c];
                    double scale = weights[q] * idf[q] * (k1 + 1.0);
                    int64_t kind = kinds[q];
                    int32_t found_mark = -2 - (int32_t)groups[q];
                    int64_t from = post_starts[tids[q]], stop = post_starts[tids[q] + 1];
                    int64_t length = stop - from;
                    double steps = 1.0;
                    for (int64_t l = length; l > 1; l >>= 1)
                        steps += 1.0;
                    if ((double)kept * steps < (double)length) {
                        /* Few candidates: look each up in the sorted postings. */
                        skipped += length;
                        for (Py_ssize_t i = 0; i < kept; i++) {
                            int64_t d = cands[i];
                            if (kind == 2 && mark[d] == found_mark)
                                continue;
                            int64_t p = find(post_ords, from, stop, (int32_t)d);
                            if (p >= 0)
                                add_part(acc, mark, d, post_tfs[p], post_lengths != NULL ? post_lengths[p] : doc_lengths[d], scale, norm0, norm1, kind,
                                         found_mark);
                        }
                    } else {
                        for (int64_t p = from; p < stop; p++) {
                            int32_t d = post_ords[p];
                            if (d < 0 || d >= m || d >= docs || mark[d] >= 0)
                                continue;
                            if (kind == 2 && mark[d] == found_mark)
                                continue;
                            add_part(acc, mark, d, post_tfs[p], post_lengths != NULL ? post_lengths[p] : doc_lengths[d], scale, norm0, norm1, kind, found_mark);
                        }
                    }
                }
            }
        }
    }
    if (kept >= 0) {
        for (Py_ssize_t i = 0; i < kept; i++)
            values[i] = acc[cands[i]];
        for (Py_ssize_t i = 0; i < n; i++) {
            acc[touched[i]] = 0.0;
            mark[touched[i]] = 0;
        }
        memcpy(touched, cands, (size_t)kept * sizeof(int64_t));
        n = kept;
    } else if (stems) {
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t d = touched[i];
            values[i] = acc[d];
            acc[d] = 0.0;
            mark[d] = 0;
        }
    } else {
        /* No stem marked anything: the marks are left alone (their lines are not read in). */
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t d = touched[i];
            values[i] = acc[d];
            acc[d] = 0.0;
        }
    }
    Py_END_ALLOW_THREADS
    if (no_memory) {
        for (Py_ssize_t i = 0; i < n; i++) {
            acc[touched[i]] = 0.0;
            mark[touched[i]] = 0;
        }
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("nLL", n, skipped, own.unread);
done:
    PyMem_RawFree(units);
    PyMem_RawFree(cols);
    PyMem_RawFree(unit_of);
    PyMem_RawFree(rest);
    PyMem_RawFree(heap);
    PyMem_RawFree(cands);
    engram_columns_free(&own);
    engram_release_all(v, 20);
    return result;
}
