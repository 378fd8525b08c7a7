/* A query plan's columns as the postings pass reads them (for _kernels_maxscore.c's postings_top).
 *
 * Why: the pass's callers worked out per column its idf from the document frequencies and, once
 * the exact forms their stems cover were known (engine/postings.py), which columns to leave out
 * and which stems to make plain, in some dozen numpy and Python steps a search: at 10k documents
 * as long as the pass itself. Here they are one loop over the columns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#include "_kernels.h"

/* For each column: its group's one stem column before it when it is an exact form (kind 2) whose
 * group has exactly one stem (kind 1) before it, else -1. The pass marks that stem's holders before
 * it reads the form's (a unit's columns in order), so the form's unmarked holders are those
 * without the stem. */
static void stems_before(Py_ssize_t t, const int64_t *kinds, const int64_t *groups, Py_ssize_t *stem_of)
{
    for (Py_ssize_t q = 0; q < t; q++) {
        stem_of[q] = -1;
        if (kinds[q] != 2)
            continue;
        Py_ssize_t found = -1, count = 0;
        for (Py_ssize_t r = 0; r < q; r++)
            if (kinds[r] == 1 && groups[r] == groups[q]) {
                found = r;
                count++;
            }
        if (count == 1)
            stem_of[q] = found;
    }
}

/* The columns as read (engram_columns_make's work once checked and allocated). */
static long long query_columns(Py_ssize_t t, const int64_t *tids, const int64_t *kinds, const int64_t *groups,
                               const double *idf, const int64_t *df, double live, const int32_t *covered_by,
                               const int64_t *post_starts, int64_t *out_tids, int64_t *out_kinds, double *out_idf,
                               Py_ssize_t *stem_of)
{
    long long unread = 0;
    stems_before(t, kinds, groups, stem_of);
    for (Py_ssize_t q = 0; q < t; q++) {
        out_tids[q] = tids[q];
        out_kinds[q] = kinds[q];
        if (idf != NULL)
            out_idf[q] = idf[q];
        else if (tids[q] >= 0) {
            double held = (double)df[tids[q]];
            out_idf[q] = log1p((live - held + 0.5) / (held + 0.5));
        } else
            out_idf[q] = 1.0; /* (absent: never read) */
    }
    if (covered_by == NULL)
        return 0;
    /* The exact forms their stems are known to cover: left out, their entries counted. */
    for (Py_ssize_t q = 0; q < t; q++) {
        Py_ssize_t s = stem_of[q];
        if (s >= 0 && tids[q] >= 0 && tids[s] >= 0 && covered_by[tids[q]] == tids[s]) {
            unread += post_starts[tids[q] + 1] - post_starts[tids[q]];
            out_tids[q] = -1;
        }
    }
    /* A stem with no exact form of its group left to read marks for nothing: made plain (kind 0),
     * so that the pass neither writes its marks nor clears them. */
    for (Py_ssize_t s = 0; s < t; s++) {
        if (kinds[s] != 1 || out_tids[s] < 0)
            continue;
        int read_after = 0;
        for (Py_ssize_t q = 0; q < t; q++)
            read_after |= kinds[q] == 2 && groups[q] == groups[s] && out_tids[q] >= 0;
        if (!read_after)
            out_kinds[s] = 0;
    }
    return unread;
}

int engram_columns_make(EngramColumns *c, Py_ssize_t t, const int64_t *tids, const int64_t *kinds,
                        const int64_t *groups, const double *weights, const double *idf, const int64_t *df,
                        Py_ssize_t df_n, double live, const int32_t *covered_by, const int64_t *post_starts,
                        Py_ssize_t vocab, Py_ssize_t total)
{
    if (idf == NULL && (df == NULL || !(live > 0))) {
        PyErr_SetString(PyExc_ValueError, "without idf, df and a live count above 0 are needed");
        return -1;
    }
    for (Py_ssize_t q = 0; q < t; q++) {
        if (tids[q] >= vocab || kinds[q] < 0 || kinds[q] > 2 || groups[q] < 0 || groups[q] >= (1 << 30)
            || !(weights[q] > 0) || (idf != NULL && !(idf[q] > 0))
            || (tids[q] >= 0 && ((idf == NULL && tids[q] >= df_n) || post_starts[tids[q]] < 0
                                 || post_starts[tids[q]] > post_starts[tids[q] + 1] || post_starts[tids[q] + 1] > total))) {
            PyErr_Format(PyExc_ValueError, "query column %zd: term, kind, group, weight or postings out of range", q);
            return -1;
        }
    }
    /* One block: the ids and kinds (int64), the idf (double) and the stems' columns, t + 1 each. */
    size_t each = (size_t)t + 1;
    char *block = PyMem_RawMalloc(each * (2 * sizeof(int64_t) + sizeof(double) + sizeof(Py_ssize_t)));
    if (block == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    c->tids = (int64_t *)block;
    c->kinds = c->tids + each;
    c->idf = (double *)(c->kinds + each);
    c->stem_of = (Py_ssize_t *)(c->idf + each);
    c->unread = query_columns(t, tids, kinds, groups, idf, df, live, covered_by, post_starts, c->tids, c->kinds,
                              c->idf, c->stem_of);
    for (Py_ssize_t q = 0; q < t; q++)
        if (!(c->idf[q] > 0)) {
            PyErr_Format(PyExc_ValueError, "query column %zd: idf not above 0 (a df above the live count)", q);
            return -1; /* (the caller frees the block) */
        }
    return 0;
}

void engram_columns_free(EngramColumns *c)
{
    PyMem_RawFree(c->tids); /* the block's start, or NULL */
    c->tids = NULL;
}
