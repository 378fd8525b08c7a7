/* A search's hits with the turns around them, on ordinals (a module function of _kernels, registered in
 * _kernels.c).
 *
 * Why: a v5 take and a Kindgi retrieve judge each hit with the turn before it, and the one after it
 * joins them (context_columns.in_context). Worked out as numpy steps (the hits after them, whether
 * each is live and passes the filters, a sort, the distinct ones, the same test of the turns before),
 * that was some fifteen array calls a collection for a hundred ordinals. Here it is one pass and a sort.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_kernels.h"

const char engram_context_candidates_doc[] =
"context_candidates(found, live, mask, follow, cands, has_prev)\n--\n\n"
"Write into cands (int64) the hits at the ordinals found (int64, -1: none) and, with follow, each\n"
"usable ordinal just after a hit, ascending and each once, and into has_prev (bool) whether the\n"
"ordinal just before each is usable; return how many. An ordinal is usable when live (bool, by\n"
"ordinal) and, with a mask (bool, by ordinal, or None), inside it and passed by it. Both outputs\n"
"hold at least twice as many items as found.";

static int compare_ords(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Whether ordinal o is live and, with a mask, passed by it (ranking.usable). */
static inline int usable(int64_t o, const uint8_t *live, Py_ssize_t n_live, const uint8_t *mask, Py_ssize_t n_mask)
{
    if (o < 0 || o >= n_live || !live[o])
        return 0;
    return mask == NULL || (o < n_mask && mask[o]);
}

PyObject *engram_context_candidates(PyObject *self, PyObject *args)
{
    PyObject *found_obj, *live_obj, *mask_obj, *cands_obj, *prev_obj;
    int follow = 0;
    if (!PyArg_ParseTuple(args, "OOOpOO:context_candidates", &found_obj, &live_obj, &mask_obj, &follow, &cands_obj,
                          &prev_obj))
        return NULL;
    int masked = mask_obj != Py_None;
    PyObject *objs[5] = {found_obj, live_obj, masked ? mask_obj : live_obj, cands_obj, prev_obj};
    static const char *names[5] = {"found", "live", "mask", "cands", "has_prev"};
    Py_buffer v[5];
    memset(v, 0, sizeof(v));
    PyObject *result = NULL;
    if (engram_get_buffers(objs, v, 5, 3, names) < 0)
        goto done;
    Py_ssize_t n = v[0].len / 8;
    if (engram_check_array(&v[0], 8, "ql", -1, "found") < 0 || engram_check_array(&v[1], 1, "?B", -1, "live") < 0
        || engram_check_array(&v[2], 1, "?B", -1, "mask") < 0)
        goto done;
    /* (each output holds at least 2n: a hit and the one after it each) */
    if (engram_check_array(&v[3], 8, "ql", v[3].len / 8 >= 2 * n ? v[3].len / 8 : 2 * n, "cands") < 0
        || engram_check_array(&v[4], 1, "?B", v[4].len >= 2 * n ? v[4].len : 2 * n, "has_prev") < 0)
        goto done;
    const int64_t *found = v[0].buf;
    const uint8_t *live = v[1].buf, *mask = masked ? v[2].buf : NULL;
    Py_ssize_t n_live = v[1].len, n_mask = masked ? v[2].len : 0;
    int64_t *cands = v[3].buf;
    uint8_t *has_prev = v[4].buf;
    Py_ssize_t m = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t o = found[i];
        if (o < 0)
            continue;
        cands[m++] = o;
        if (follow && usable(o + 1, live, n_live, mask, n_mask))
            cands[m++] = o + 1;
    }
    qsort(cands, (size_t)m, sizeof(int64_t), compare_ords);
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (kept && cands[kept - 1] == cands[i])
            continue;
        cands[kept++] = cands[i];
    }
    m = kept;
    for (Py_ssize_t i = 0; i < m; i++)
        has_prev[i] = (uint8_t)usable(cands[i] - 1, live, n_live, mask, n_mask);
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(m);
done:
    engram_release_all(v, 5);
    return result;
}
