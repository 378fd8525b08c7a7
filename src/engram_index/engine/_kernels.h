/* The loops of _kernels_loops.c, for the module in _kernels.c. */
#ifndef ENGRAM_KERNELS_H
#define ENGRAM_KERNELS_H

#include <Python.h>
#include <stdint.h>

/* Hamming distances from query to each of n rows of width bytes into out; rows whose excluded byte
 * is set (excluded may be NULL) get UINT16_MAX. */
typedef void (*engram_scan_fn)(const uint8_t *query, const uint8_t *codes, Py_ssize_t n, Py_ssize_t width,
                               const uint8_t *excluded, uint16_t *out);

/* The fastest scan this CPU runs at a level (0: any; 1: no AVX-512; 2: none above popcnt; 3: the
 * portable loop), and its name. */
engram_scan_fn engram_select_scan(int level, const char **name);

/* The ascending ordinals of the count smallest distances (ties: lower ordinals), the rows the scan
 * excluded (UINT16_MAX) skipped, or -1 when out of memory (_kernels_pick.c); level as
 * engram_select_scan's (0: the AVX-512 BW pass where the CPU has it; 0 or 1: the AVX2 one where it
 * has that; else the portable one). */
Py_ssize_t engram_pick_nearest(const uint16_t *dist, Py_ssize_t n, Py_ssize_t bits, int64_t *out, Py_ssize_t count,
                               int level);

/* This thread's buffer of at least n distances (NULL when out of memory). */
uint16_t *engram_scratch(Py_ssize_t n);

/* numpy's pairwise sum of n doubles, as its float64 add.reduce sums a contiguous run: 8
 * accumulators up to 128 values, halves beyond (defined in _kernels_fuse.c; fusion's means and
 * variances and a single row's BM25 parts sum through it). */
double engram_pairwise_sum(const double *a, Py_ssize_t n);

/* IEEE half precision to single, exactly. */
float engram_half_to_float(uint16_t h);

/* A float16 row's dot product with a float64 query of d components, summed in float64. */
typedef double (*engram_dot_fn)(const uint16_t *v, const double *q, Py_ssize_t d);

/* A float16 row's squared norm, summed in float64 (exact products). */
typedef double (*engram_self_dot_fn)(const uint16_t *v, Py_ssize_t d);

/* Ask for the bytes [p, p + bytes) to be brought into the cache ahead of their use: a hint only
 * (no effect where the compiler has no prefetch). Rows read in a random order, as the re-rank and
 * the BM25 parts read theirs, otherwise wait on memory one after another. */
#if defined(__GNUC__)
#define ENGRAM_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
#else
#define ENGRAM_PREFETCH(p) ((void)(p))
#endif
static inline void engram_prefetch(const void *p, Py_ssize_t bytes)
{
    for (Py_ssize_t off = 0; off < bytes; off += 64)
        ENGRAM_PREFETCH((const char *)p + off);
}

/* Number the query's terms in a lookup table over the vocabulary (table[qids[q]] = q + 1), and
 * zero them again: bm25_parts and word_presence find a row entry's query term in one read. */
static inline void engram_number_terms(int32_t *table, const int64_t *qids, Py_ssize_t t)
{
    for (Py_ssize_t q = 0; q < t; q++)
        table[qids[q]] = (int32_t)(q + 1);
}

static inline void engram_unnumber_terms(int32_t *table, const int64_t *qids, Py_ssize_t t)
{
    for (Py_ssize_t q = 0; q < t; q++)
        table[qids[q]] = 0;
}

/* The bounds [*start, *stop) of ordinal o's row in the term counts' arena: 1, or 0 when o has none
 * (outside the counts, negative, or no document), -1 when the row lies outside the arena. */
static inline int engram_row_bounds(int64_t o, Py_ssize_t docs, const int32_t *lengths, const int64_t *starts,
                                    Py_ssize_t arena, int64_t *start, int64_t *stop)
{
    if (o < 0 || o >= docs || lengths[o] <= 0)
        return 0;
    *start = starts[o];
    *stop = *start + lengths[o];
    return *start < 0 || *stop > arena ? -1 : 1;
}

/* A pass over the term counts' rows answers None, or NULL with a ValueError when a row lay outside
 * the arena (called with the GIL held). */
static inline PyObject *engram_rows_result(int bad_row)
{
    if (bad_row) {
        PyErr_SetString(PyExc_ValueError, "a row lies outside the arena");
        return NULL;
    }
    return Py_NewRef(Py_None);
}

/* Restore the min-heap order below position i of a heap of n doubles (the top-k picks of
 * _kernels_postings.c and _kernels_maxscore.c). */
static inline void engram_sift(double *heap, Py_ssize_t n, Py_ssize_t i)
{
    double x = heap[i];
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && heap[child + 1] < heap[child])
            child++;
        if (!(heap[child] < x))
            break;
        heap[i] = heap[child];
        i = child;
    }
    heap[i] = x;
}

/* The number of `term` among the first *distinct distinct terms (compared by identity, then by value),
 * appended as a new one when it is none of them; -1 with an exception set when a comparison fails.
 * The snippet window counts each distinct term once, so spans are numbered by their term. */
static inline Py_ssize_t engram_term_id(PyObject **terms, Py_ssize_t *distinct, PyObject *term)
{
    for (Py_ssize_t id = 0; id < *distinct; id++) {
        if (terms[id] == term)
            return id;
        int same = PyObject_RichCompareBool(terms[id], term, Py_EQ);
        if (same < 0)
            return -1;
        if (same)
            return id;
    }
    terms[*distinct] = term;
    return (*distinct)++;
}

/* The fastest dot products this CPU runs (the portable ones when asked); name: the loop's name. */
engram_dot_fn engram_select_dot(int portable, const char **name);
engram_self_dot_fn engram_select_self_dot(int portable);

/* Buffer checks shared by the module's files (_kernels.c): acquire a C-contiguous view (writable
 * when asked) or set TypeError, or the first `count` of an array of objects (the outputs last); release the acquired ones of an array of views; say whether a view
 * holds items of one size and format; check size, format and count (count < 0: any) or set an error. */
int engram_get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *name);
int engram_get_buffers(PyObject *const *objs, Py_buffer *views, int count, int writable_from, const char *const *names);
void engram_release_all(Py_buffer *views, int count);
int engram_has_format(const Py_buffer *view, Py_ssize_t itemsize, const char *formats);
int engram_check_array(const Py_buffer *view, Py_ssize_t itemsize, const char *formats, Py_ssize_t count,
                       const char *name);

/* The inverted postings of the term counts and the exact keyword scoring over them (_kernels_postings.c). */
extern const char engram_build_postings_doc[];
extern const char engram_postings_scores_doc[];
PyObject *engram_build_postings(PyObject *self, PyObject *args);
PyObject *engram_postings_scores(PyObject *self, PyObject *args);

/* The spans of a query's terms in an ASCII text (_kernels_terms.c). */
extern const char engram_ascii_spans_doc[];
PyObject *engram_ascii_spans(PyObject *self, PyObject *args);

/* Which query words the term counts' rows hold, and the rows beside them (_kernels_holds.c). */
extern const char engram_word_presence_doc[];
PyObject *engram_word_presence(PyObject *self, PyObject *args);
extern const char engram_context_candidates_doc[];
PyObject *engram_context_candidates(PyObject *self, PyObject *args);
extern const char engram_word_coverage_doc[];
PyObject *engram_word_coverage(PyObject *self, PyObject *args);

/* The hybrid search's union, fusion and top (_kernels_fuse.c). */
extern const char engram_fuse_doc[];
PyObject *engram_fuse(PyObject *self, PyObject *args);

/* Whether use_portable() asked for the portable loops, and the scan's level (read under the GIL). */
int engram_portable(void);
int engram_scan_level(void);

/* The kernels' work without their buffer checks, each run with the GIL released by its caller, so
 * that hybrid_rest (_kernels_rest.c) runs a hybrid search's rest as one call: nearest's scan and
 * pick (-1: out of memory), cosines' loop, bm25_parts' walk (1: a row outside the arena),
 * combine_scores' sums (each row summed as a row of a call of `as_rows` rows), rank_top's and
 * fuse's (-1: out of memory). */
Py_ssize_t engram_nearest_into(const uint8_t *query, Py_ssize_t width, const uint8_t *codes, Py_ssize_t n,
                               const uint8_t *excluded, int64_t *out, Py_ssize_t count, int level);
void engram_cosines_into(const double *q, Py_ssize_t d, const uint16_t *vectors, const double *inv_norms,
                         const int64_t *ords, Py_ssize_t m, float *out, engram_dot_fn dot);
int engram_bm25_into(const int64_t *ords, Py_ssize_t m, const int64_t *starts, const int32_t *lengths,
                     const int64_t *doc_lengths, Py_ssize_t docs, const uint32_t *ids, const uint16_t *tfs,
                     Py_ssize_t arena, const int64_t *qids, const int64_t *cols, const double *idf, Py_ssize_t t,
                     int32_t *table, Py_ssize_t vocab, double k1, double b, double average, double *out,
                     Py_ssize_t width);
void engram_combine_into(const double *parts, Py_ssize_t rows, Py_ssize_t width, const int64_t *const cols[4],
                         const Py_ssize_t counts[4], double part_weight, Py_ssize_t as_rows, double *gathered,
                         float *out);
Py_ssize_t engram_rank_top_into(const int64_t *ords, const float *sims, Py_ssize_t n, Py_ssize_t top,
                                int64_t *out_ords, float *out_sims);
Py_ssize_t engram_fuse_into(const int64_t *vec_ords, const float *vec_sims, const float *vec_bm25, Py_ssize_t nv,
                            const int64_t *kw_ords, const float *kw_bm25, Py_ssize_t nk, const double *q,
                            const uint16_t *vectors, const double *inv_norms, const uint8_t *live, Py_ssize_t size,
                            Py_ssize_t d, int method, double alpha, int rrf_k, engram_dot_fn dot, int64_t *out_ords,
                            double *out_fused, float *out_sims, float *out_bm25, uint8_t *out_has_sim, Py_ssize_t top);

/* A started hybrid search's rest in one call (_kernels_rest.c). */
extern const char engram_hybrid_rest_doc[];
PyObject *engram_hybrid_rest(PyObject *self, PyObject *args);

/* keyword._score's sums of the BM25 parts, as numpy added them (_kernels_postings.c). */
extern const char engram_combine_scores_doc[];
PyObject *engram_combine_scores(PyObject *self, PyObject *args);
extern const char engram_word_sums_doc[];
PyObject *engram_word_sums(PyObject *self, PyObject *args);

/* The exact top-k's candidates among the postings' scores (_kernels_postings.c). */
extern const char engram_select_top_doc[];
PyObject *engram_select_top(PyObject *self, PyObject *args);

/* A query plan's columns as the postings pass reads them (_kernels_columns.c): tids, kinds and idf
 * (idf as given, or from df over live documents), with the exact forms covered_by (NULL: none
 * known) says their group's one stem covers left out (-1) and a stem with no exact form of its
 * group left made plain (kind 0); stem_of, each exact form's group's one stem column before it, or
 * -1; unread, the entries of the forms left out. */
typedef struct {
    int64_t *tids, *kinds;
    double *idf;
    Py_ssize_t *stem_of;
    long long unread;
} EngramColumns;

/* Check the given columns and make c's (one block, freed by engram_columns_free, also after a
 * failure); -1 with a Python error set. The GIL held. */
int engram_columns_make(EngramColumns *c, Py_ssize_t t, const int64_t *tids, const int64_t *kinds,
                        const int64_t *groups, const double *weights, const double *idf, const int64_t *df,
                        Py_ssize_t df_n, double live, const int32_t *covered_by, const int64_t *post_starts,
                        Py_ssize_t vocab, Py_ssize_t total);
void engram_columns_free(EngramColumns *c);

/* The postings' bounds and their pruned (MaxScore) scoring for a top k (_kernels_maxscore.c). */
extern const char engram_postings_bounds_doc[];
extern const char engram_postings_top_doc[];
PyObject *engram_postings_bounds(PyObject *self, PyObject *args);
PyObject *engram_postings_top(PyObject *self, PyObject *args);

/* The vector search's best by exact cosine, ties by ordinal (_kernels_fuse.c). */
extern const char engram_rank_top_doc[];
PyObject *engram_rank_top(PyObject *self, PyObject *args);

/* The snippet window of an ASCII body (_kernels_snippet.c). */
extern const char engram_snippet_bounds_doc[];
PyObject *engram_snippet_bounds(PyObject *self, PyObject *args);

/* A found term's place in an ASCII text (the term a new reference), and a growing array of them. */
typedef struct {
    Py_ssize_t start, end;
    PyObject *term;
} engram_span;
typedef struct {
    engram_span *items;
    Py_ssize_t n, cap;
} engram_spans;

/* ascii_spans' finding into out (appended; 0, or -1 with an exception set), and out's release
 * (_kernels_terms.c). stem_probes and exact_terms, when not NULL, are tuples of the wanted stems'
 * probes and of the other wanted ASCII terms: a plain word is then matched without making a term
 * that is not wanted (one holding no stem's probe is not stemmed); stem_cache, when not NULL, is
 * the dict stem() answers from first (the word's stem read there, stem() called on a miss). */
int engram_find_ascii_spans(PyObject *text, PyObject *wanted, PyObject *probes, PyObject *cache, PyObject *analyze,
                            PyObject *stem, PyObject *stopwords, PyObject *stem_probes, PyObject *exact_terms,
                            PyObject *stem_cache, engram_spans *out);
void engram_spans_clear(engram_spans *spans);
/* Append a (start, end, term) span (a new reference to term); -1 with an exception set on failure. */
int engram_spans_push(engram_spans *out, Py_ssize_t start, Py_ssize_t end, PyObject *term);

/* snippet_bounds' choice over n spans' bounds (start, end pairs) and distinct-term numbers (ids,
 * below n), counts a zeroed scratch of n; and explain._snap's end of a window alone (_kernels_snippet.c). */
void engram_window(const unsigned char *s, Py_ssize_t length, const Py_ssize_t *bounds, const Py_ssize_t *ids,
                   Py_ssize_t n, Py_ssize_t max_chars, Py_ssize_t *counts, Py_ssize_t *start_out, Py_ssize_t *end_out);
Py_ssize_t engram_snap_end(const unsigned char *s, Py_ssize_t length, Py_ssize_t end, Py_ssize_t keep_end);
/* The same for a body of any kind (a str), combining marks told by is_mark(char) for a non-ASCII
 * character (explain._is_mark); 0, or -1 with an exception set. */
int engram_window_any(PyObject *body, const Py_ssize_t *bounds, const Py_ssize_t *ids, Py_ssize_t n,
                      Py_ssize_t max_chars, Py_ssize_t *counts, PyObject *is_mark, Py_ssize_t *start_out,
                      Py_ssize_t *end_out);
int engram_snap_end_any(PyObject *body, Py_ssize_t end, Py_ssize_t keep_end, PyObject *is_mark, Py_ssize_t *end_out);

/* A hit's whole explanation for an ASCII text (_kernels_explain.c). */
extern const char engram_ascii_explain_doc[];
PyObject *engram_ascii_explain(PyObject *self, PyObject *args);
/* ascii_explain's shared parts (_kernels_explain.c): the words' check (their alternatives counted
 * into *most), the interned names, and the matches and text snippet from a text's spans (is_mark:
 * explain._is_mark, for a text that is not ASCII; NULL for an ASCII one). */
int engram_check_words(PyObject *words, Py_ssize_t *most);
int engram_intern_names(void);
PyObject *engram_explain_spans(PyObject *text, const engram_spans *spans, PyObject *words, PyObject *others,
                               PyObject *tags, PyObject *source, PyObject *made, PyObject *match_type,
                               PyObject *snippet_type, Py_ssize_t max_chars, PyObject *is_mark, Py_ssize_t most);

/* The explanation of a text with a few pieces of other characters (_kernels_explain_any.c). */
extern const char engram_mostly_ascii_explain_doc[];
PyObject *engram_mostly_ascii_explain(PyObject *self, PyObject *args);

/* A hit's matched terms from the wanted terms found in its text, any script (_kernels_explain.c). */
extern const char engram_match_terms_doc[];
PyObject *engram_match_terms(PyObject *self, PyObject *args);

#endif
