/* The coarse scan's pick (behind _kernels.c's nearest): the distance at which the count nearest
 * rows are reached, and the pass that takes them. Plain C over raw arrays; the module checks every
 * buffer first.
 *
 * Why a sample: the cut was found from histograms the scan kept of every row's distance, a count's
 * read and write a row, and under a filter a row's admission added to it. Now a sample of a few thousand rows says where the cut must lie, within a window wide enough
 * that missing it is rare; one pass over the distances counts the rows below the window and
 * histograms those in it, and finds the exact cut there. When the window misses it (the count
 * proves so), the rows are all counted, as before. Either way the cut and its ties are the exact
 * ones: the same rows are taken as by a histogram of every row. At 100k rows of 48 bytes on an
 * AVX2-only AMD EPYC, `nearest` took 0.85x the CPU of the AVX2 scan with histograms and 0.88x the
 * popcnt one's (bench/scan_loops.py, warm); with the caches flushed, 0.92-0.94x unfiltered and
 * 0.72-0.81x under a tag a quarter of the rows pass (bench/ab_kernels.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_PICK 1
#endif

#include "_kernels.h"

/* The pick's last pass from row r on: rows below the cut, and the first `ties` rows at it, written
 * from out[written] until count are; the new written. The portable loop. */
static Py_ssize_t take_portable(const uint16_t *dist, Py_ssize_t r, Py_ssize_t n, uint16_t cut, Py_ssize_t ties,
                                int64_t *out, Py_ssize_t written, Py_ssize_t count)
{
    for (; r < n && written < count; r++) {
        uint16_t d = dist[r];
        if (d < cut || (d == cut && ties-- > 0))
            out[written++] = r;
    }
    return written;
}

#ifdef HAVE_X86_PICK
/* The same pass 32 distances to a compare (AVX-512 BW): about one row in a hundred is taken, so
 * most blocks hold none and cost one compare; a block that holds some is walked row by row, in
 * order, as the portable loop walks it (the same rows, the same ties). */
__attribute__((target("avx512f,avx512bw"))) static Py_ssize_t take_avx512(const uint16_t *dist, Py_ssize_t n,
                                                                          uint16_t cut, Py_ssize_t ties, int64_t *out,
                                                                          Py_ssize_t count)
{
    Py_ssize_t r = 0, written = 0;
    __m512i at = _mm512_set1_epi16((short)cut);
    for (; r + 32 <= n && written < count; r += 32) {
        __m512i d = _mm512_loadu_si512((const void *)(dist + r));
        uint32_t below = (uint32_t)_mm512_cmplt_epu16_mask(d, at), equal = (uint32_t)_mm512_cmpeq_epu16_mask(d, at);
        for (uint32_t left = below | equal; left && written < count; left &= left - 1) {
            int j = __builtin_ctz(left);
            if (((below >> j) & 1) || ties-- > 0)
                out[written++] = r + j;
        }
    }
    return take_portable(dist, r, n, cut, ties, out, written, count);
}

static int have_avx512bw(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

/* The same pass 16 distances to a compare (AVX2), for CPUs without AVX-512 BW: AVX2 compares only
 * signed 16-bit lanes, so a distance is at most the cut where the unsigned maximum of it and the cut
 * is the cut. Blocks holding a taken row are walked as take_avx512 walks them. */
__attribute__((target("avx2"))) static Py_ssize_t take_avx2(const uint16_t *dist, Py_ssize_t n, uint16_t cut,
                                                            Py_ssize_t ties, int64_t *out, Py_ssize_t count)
{
    Py_ssize_t r = 0, written = 0;
    __m256i at = _mm256_set1_epi16((short)cut);
    for (; r + 16 <= n && written < count; r += 16) {
        __m256i d = _mm256_loadu_si256((const void *)(dist + r));
        /* movemask gives two bits a lane; the even ones stand for the lanes. */
        uint32_t within = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi16(_mm256_max_epu16(d, at), at)) & 0x55555555u;
        uint32_t equal = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi16(d, at)) & 0x55555555u;
        uint32_t below = within & ~equal;
        for (uint32_t left = within; left && written < count; left &= left - 1) {
            int bit = __builtin_ctz(left);
            if (((below >> bit) & 1) || ties-- > 0)
                out[written++] = r + bit / 2;
        }
    }
    return take_portable(dist, r, n, cut, ties, out, written, count);
}

/* AVX2, with popcnt (the window's count uses both; every AVX2 CPU has popcnt). */
static int have_avx2(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
}
#endif

/* Rows a sample reads at most (at least this many, once the rows are SAMPLE_ROWS x SAMPLE_STEP). */
#define SAMPLE_ROWS 4096
/* The fewest rows between two sampled ones: below it, every row is counted. */
#define SAMPLE_STEP 4

/* Count the rows below `lo` and histogram those at lo to lo + span (win, span + 1 bins, zeroed):
 * the portable loop. Excluded rows (UINT16_MAX) fall in neither. Blocks of 16 rows are first only
 * compared (a loop the compiler does several rows to an instruction); the few with a row in the
 * window are walked again. */
static Py_ssize_t count_window_portable(const uint16_t *dist, Py_ssize_t r, Py_ssize_t n, uint16_t lo, uint16_t span,
                                        Py_ssize_t *win)
{
    Py_ssize_t below = 0;
    for (; r < n; r += 16) {
        int rows = n - r < 16 ? (int)(n - r) : 16;
        unsigned under = 0, within = 0;
        for (int j = 0; j < rows; j++) {
            uint16_t d = dist[r + j], x = (uint16_t)(d - lo); /* below lo: wraps past any span */
            under += d < lo;
            within |= x <= span;
        }
        below += under;
        if (within)
            for (int j = 0; j < rows; j++) {
                uint16_t x = (uint16_t)(dist[r + j] - lo);
                if (x <= span)
                    win[x]++;
            }
    }
    return below;
}

#ifdef HAVE_X86_PICK
/* The same count 16 distances to a compare (AVX2): a block with no row in the window (most of
 * them) costs its compares; one with some is walked row by row. */
__attribute__((target("avx2,popcnt"))) static Py_ssize_t count_window_avx2(const uint16_t *dist, Py_ssize_t n,
                                                                          uint16_t lo, uint16_t span, Py_ssize_t *win)
{
    Py_ssize_t r = 0, below = 0;
    const __m256i at = _mm256_set1_epi16((short)lo), width = _mm256_set1_epi16((short)span);
    for (; r + 16 <= n; r += 16) {
        __m256i d = _mm256_loadu_si256((const void *)(dist + r)), x = _mm256_sub_epi16(d, at);
        /* Two mask bits a lane: lanes at or above lo, and lanes within the window (x <= span). */
        uint32_t above = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi16(_mm256_max_epu16(d, at), d));
        uint32_t within = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi16(_mm256_min_epu16(x, width), x));
        below += (32 - __builtin_popcount(above)) / 2;
        for (uint32_t left = within & 0x55555555u; left; left &= left - 1)
            win[(uint16_t)(dist[r + __builtin_ctz(left) / 2] - lo)]++;
    }
    return below + count_window_portable(dist, r, n, lo, span, win);
}
#endif

/* The exact cut from a histogram of every row: 1 with *cut and *ties set, 0 when no more than
 * `count` rows are admitted (all are taken), -1 when out of memory. Four histograms, summed after:
 * nearby rows often share a distance, and one would make each count wait for the previous. */
static int cut_by_counting(const uint16_t *dist, Py_ssize_t n, Py_ssize_t bits, Py_ssize_t count, Py_ssize_t *cut,
                           Py_ssize_t *ties)
{
    Py_ssize_t stride = bits + 2; /* the last bin: excluded rows, chosen without a branch */
    Py_ssize_t *hist = PyMem_RawCalloc(4 * (size_t)stride, sizeof(Py_ssize_t));
    if (hist == NULL)
        return -1;
    for (Py_ssize_t r = 0; r < n; r++) {
        uint16_t d = dist[r];
        hist[(r & 3) * stride + (d <= bits ? d : bits + 1)]++;
    }
    Py_ssize_t admitted = 0;
    for (Py_ssize_t d = 0; d <= bits; d++) {
        hist[d] += hist[stride + d] + hist[2 * stride + d] + hist[3 * stride + d];
        admitted += hist[d];
    }
    int found = admitted > count;
    if (found) {
        Py_ssize_t at = 0, below = 0;
        while (below + hist[at] < count)
            below += hist[at++];
        *cut = at;
        *ties = count - below;
    }
    PyMem_RawFree(hist);
    return found;
}

/* The exact cut found in a window a sample of the rows gave: 1 with *cut and *ties set, 0 when the
 * window missed it (or no sample is worth taking), -1 when out of memory. */
static int cut_by_sample(const uint16_t *dist, Py_ssize_t n, Py_ssize_t bits, Py_ssize_t count, int level,
                         Py_ssize_t *cut, Py_ssize_t *ties)
{
    Py_ssize_t step = n / SAMPLE_ROWS > SAMPLE_STEP ? n / SAMPLE_ROWS : SAMPLE_STEP;
    if (n < 4 * step || count >= n / 2)
        return 0;
    Py_ssize_t *hist = PyMem_RawCalloc((size_t)bits + 2, sizeof(Py_ssize_t));
    if (hist == NULL)
        return -1;
    for (Py_ssize_t r = step / 2; r < n; r += step) {
        uint16_t d = dist[r];
        hist[d <= bits ? d : bits + 1]++;
    }
    /* The sampled rows expected at or below the cut, and a margin of four standard deviations and
     * more (a binomial count's is at most its square root): the window from the distance where
     * fewer than that less the margin were met to where that plus the margin were. */
    double expected = (double)count / (double)step, margin = 4.0 * sqrt(expected) + 4.0;
    Py_ssize_t lo = 0, seen = 0;
    while (lo < bits && (double)(seen + hist[lo]) <= expected - margin)
        seen += hist[lo++];
    Py_ssize_t hi = lo;
    while (hi < bits && (double)(seen + hist[hi]) < expected + margin)
        seen += hist[hi++];
    PyMem_RawFree(hist);
    Py_ssize_t span = hi - lo;
    Py_ssize_t *win = PyMem_RawCalloc((size_t)span + 1, sizeof(Py_ssize_t));
    if (win == NULL)
        return -1;
    Py_ssize_t below;
#ifdef HAVE_X86_PICK
    if (level <= 1 && have_avx2())
        below = count_window_avx2(dist, n, (uint16_t)lo, (uint16_t)span, win);
    else
#endif
        below = count_window_portable(dist, 0, n, (uint16_t)lo, (uint16_t)span, win);
    (void)level;
    /* The cut is in the window when fewer than count rows lie below it and count at most to its end. */
    Py_ssize_t at = 0, reached = below;
    while (at <= span && reached + win[at] < count)
        reached += win[at++];
    int found = below < count && at <= span;
    if (found) {
        *cut = lo + at;
        *ties = count - reached;
    }
    PyMem_RawFree(win);
    return found;
}

/* Write the ordinals of the `count` smallest distances, ascending, skipping the rows the scan
 * excluded (UINT16_MAX); ties at the cut go to the lower ordinals. Give how many were written (fewer
 * when fewer rows are left), or -1 when out of memory. level: as engram_select_scan's (0: the
 * AVX-512 BW pass where the CPU has it; 0 or 1: the AVX2 one where it has that; above: the
 * portable one; the window's count likewise, AVX2 at 0 and 1). */
Py_ssize_t engram_pick_nearest(const uint16_t *dist, Py_ssize_t n, Py_ssize_t bits, int64_t *out, Py_ssize_t count,
                               int level)
{
    if (count <= 0 || n <= 0)
        return 0;
    Py_ssize_t cut = 0, ties = 0;
    int found = cut_by_sample(dist, n, bits, count, level, &cut, &ties);
    if (found == 0)
        found = cut_by_counting(dist, n, bits, count, &cut, &ties);
    if (found < 0)
        return -1;
    if (found == 0) { /* no more rows admitted than asked for: all of them */
        Py_ssize_t written = 0;
        for (Py_ssize_t r = 0; r < n; r++)
            if (dist[r] != UINT16_MAX)
                out[written++] = r;
        return written;
    }
#ifdef HAVE_X86_PICK
    if (level == 0 && have_avx512bw())
        return take_avx512(dist, n, (uint16_t)cut, ties, out, count);
    if (level <= 1 && have_avx2())
        return take_avx2(dist, n, (uint16_t)cut, ties, out, count);
#endif
    (void)level;
    return take_portable(dist, 0, n, (uint16_t)cut, ties, out, 0, count);
}
