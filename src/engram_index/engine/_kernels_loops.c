/* The inner loops behind _kernels.c: the coarse scan (its pick: _kernels_pick.c), and the float16
 * dot products of the exact re-rank and the squared norms, each a vectorised loop and a portable one
 * (chosen at run time, or forced). Plain C over raw arrays; the module checks every buffer before
 * calling them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_DOT 1
#endif

#include "_kernels.h"

/* How far ahead of the row it counts the scan asks for the codes: the hardware's own streaming
 * falls behind when the codes are not in the cache, as between searches (bench/vector_choices.py). */
#define SCAN_AHEAD 2048

/* Count the differing bits of two rows of `width` bytes. */
static inline uint32_t row_distance(const uint8_t *a, const uint8_t *b, Py_ssize_t width)
{
    uint32_t total = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= width; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8); /* unaligned-safe loads; compilers turn these into plain moves */
        memcpy(&y, b + i, 8);
        total += (uint32_t)__builtin_popcountll(x ^ y);
    }
    for (; i < width; i++)
        total += (uint32_t)__builtin_popcount((unsigned)(a[i] ^ b[i]));
    return total;
}

/* A row's distance written, or UINT16_MAX where the row is excluded: without a branch, as a filter
 * passes rows in no order a predictor can learn (a branch missed every other row cost as much as
 * the scan, in the pass after it that did this before). */
#define KEEP_ROW(r, total)                                                                      \
    if (excluded == NULL) { /* (the same each row: the compiler takes it out of the loop) */   \
        out[r] = (uint16_t)(total);                                                             \
    } else {                                                                                    \
        uint16_t kept = !excluded[r];                                                           \
        out[r] = (uint16_t)((total) | (uint16_t)(kept - 1u));                                   \
    }
/* Rows of a fixed number of 64-bit words, so that the compiler unrolls the inner loop. */
#define FIXED_SCAN(words)                                                                       \
    for (Py_ssize_t r = 0; r < n; r++) {                                                        \
        const uint8_t *row = codes + r * (words) * 8;                                           \
        if (SCAN_AHEAD < end - row) /* (a pointer past the array's end is undefined in C) */   \
            ENGRAM_PREFETCH(row + SCAN_AHEAD);                                                  \
        uint32_t total = 0;                                                                     \
        for (int i = 0; i < (words); i++) {                                                     \
            uint64_t x;                                                                         \
            memcpy(&x, row + 8 * i, 8);                                                         \
            total += (uint32_t)__builtin_popcountll(x ^ q[i]);                                  \
        }                                                                                       \
        KEEP_ROW(r, total)                                                                      \
    }

/* The scan itself. It is compiled twice on x86-64, with and without the popcnt instruction, and
 * chosen at run time (engram_select_scan), so that one build runs on any x86-64 CPU at full speed
 * where it can and the tests can run the portable one too. Distances are integers: both give the
 * same. */
#define DEFINE_SCAN(name, attributes)                                                           \
    attributes static void name(const uint8_t *query, const uint8_t *codes, Py_ssize_t n,       \
                                Py_ssize_t width, const uint8_t *excluded, uint16_t *out)       \
    {                                                                                           \
        uint64_t q[32];                                                                         \
        const uint8_t *end = codes + n * width;                                                 \
        if (width % 8 == 0 && width <= (Py_ssize_t)sizeof(q))                                   \
            memcpy(q, query, (size_t)width);                                                    \
        switch (width) {                                                                        \
        case 16: FIXED_SCAN(2) return;   /* 128 dimensions */                                   \
        case 32: FIXED_SCAN(4) return;   /* 256 */                                              \
        case 48: FIXED_SCAN(6) return;   /* 384: MiniLM, bge-small */                           \
        case 64: FIXED_SCAN(8) return;   /* 512 */                                              \
        case 96: FIXED_SCAN(12) return;  /* 768: nomic-embed-text, bge-base */                  \
        case 128: FIXED_SCAN(16) return; /* 1024: mxbai-embed-large, bge-m3 */                  \
        case 192: FIXED_SCAN(24) return; /* 1536: text-embedding-3-small */                     \
        default:                                                                                \
            for (Py_ssize_t r = 0; r < n; r++) {                                                \
                uint32_t total = row_distance(query, codes + r * width, width);                 \
                KEEP_ROW(r, total)                                                              \
            }                                                                                   \
        }                                                                                       \
    }

DEFINE_SCAN(scan_portable, )
#ifdef HAVE_X86_DOT
DEFINE_SCAN(scan_popcnt, __attribute__((target("popcnt"))))

/* The scan with AVX-512 VPOPCNTDQ, for rows of whole 64-bit words (every width above but 8-byte
 * multiples only; others take the popcnt loop): each row's words are XORed with the query and
 * counted 8 words to a register (masked loads: no byte past the row is read), then 8 rows' lane
 * counts are added across in one transposing tree, so that the 8 distances come out together.
 * Integer counts: the same distances as the other loops, in the same order (1.3x the popcnt loop
 * at 100k rows of 48 bytes, measured). */
__attribute__((target("popcnt,avx512f,avx512vpopcntdq"))) static void scan_avx512(
    const uint8_t *query, const uint8_t *codes, Py_ssize_t n, Py_ssize_t width, const uint8_t *excluded,
    uint16_t *out)
{
    Py_ssize_t words = width / 8, chunks = (words + 7) / 8;
    if (width % 8 != 0 || chunks > 4) {
        scan_popcnt(query, codes, n, width, excluded, out);
        return;
    }
    /* Per chunk of 8 words: which of its words the row has, and the query's words there. */
    __mmask8 masks[4];
    __m512i q[4];
    for (Py_ssize_t c = 0; c < chunks; c++) {
        Py_ssize_t have = words - 8 * c < 8 ? words - 8 * c : 8;
        masks[c] = (__mmask8)((1u << have) - 1u);
        q[c] = _mm512_maskz_loadu_epi64(masks[c], query + 64 * c);
    }
    const uint8_t *end = codes + n * width;
    Py_ssize_t r = 0;
    for (; r + 8 <= n; r += 8) {
        const uint8_t *rows = codes + r * width;
        for (Py_ssize_t ahead = 0; ahead < 8 * width; ahead += 64)
            if (SCAN_AHEAD + ahead < end - rows)
                ENGRAM_PREFETCH(rows + SCAN_AHEAD + ahead);
        __m512i lanes[8];
        for (int j = 0; j < 8; j++) {
            const uint8_t *row = rows + j * width;
            __m512i sum = _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_maskz_loadu_epi64(masks[0], row), q[0]));
            for (Py_ssize_t c = 1; c < chunks; c++)
                sum = _mm512_add_epi64(sum, _mm512_popcnt_epi64(
                    _mm512_xor_si512(_mm512_maskz_loadu_epi64(masks[c], row + 64 * c), q[c])));
            lanes[j] = sum;
        }
        /* Pairs of rows (64-bit interleave), then quads (128-bit lanes), then all 8: d's lane j
         * holds row r + j's count. */
        __m512i a0 = _mm512_add_epi64(_mm512_unpacklo_epi64(lanes[0], lanes[1]), _mm512_unpackhi_epi64(lanes[0], lanes[1]));
        __m512i a1 = _mm512_add_epi64(_mm512_unpacklo_epi64(lanes[2], lanes[3]), _mm512_unpackhi_epi64(lanes[2], lanes[3]));
        __m512i a2 = _mm512_add_epi64(_mm512_unpacklo_epi64(lanes[4], lanes[5]), _mm512_unpackhi_epi64(lanes[4], lanes[5]));
        __m512i a3 = _mm512_add_epi64(_mm512_unpacklo_epi64(lanes[6], lanes[7]), _mm512_unpackhi_epi64(lanes[6], lanes[7]));
        __m512i b0 = _mm512_add_epi64(_mm512_shuffle_i64x2(a0, a1, 0x88), _mm512_shuffle_i64x2(a0, a1, 0xDD));
        __m512i b1 = _mm512_add_epi64(_mm512_shuffle_i64x2(a2, a3, 0x88), _mm512_shuffle_i64x2(a2, a3, 0xDD));
        __m512i d = _mm512_add_epi64(_mm512_shuffle_i64x2(b0, b1, 0x88), _mm512_shuffle_i64x2(b0, b1, 0xDD));
        uint64_t counts[8];
        _mm512_storeu_si512((void *)counts, d);
        for (int j = 0; j < 8; j++) {
            Py_ssize_t row = r + j, total = (Py_ssize_t)counts[j];
            KEEP_ROW(row, total)
        }
    }
    for (; r < n; r++) {
        uint32_t total = row_distance(query, codes + r * width, width);
        KEEP_ROW(r, total)
    }
}
#endif

#ifdef HAVE_X86_DOT
/* A 32-byte block's set bits, counted per byte from a 16-entry table of the nibbles (vpshufb). */
#define AVX2_BYTE_COUNTS(x, table, nibble)                                                        \
    _mm256_add_epi8(_mm256_shuffle_epi8((table), _mm256_and_si256((x), (nibble))),                \
                    _mm256_shuffle_epi8((table), _mm256_and_si256(_mm256_srli_epi16((x), 4), (nibble))))

/* Two rows' totals from their vpsadbw sums (four 64-bit lane sums each): a's, then b's. */
__attribute__((target("avx2"))) static inline void avx2_two_totals(__m256i a, __m256i b, uint64_t *a_total,
                                                                  uint64_t *b_total)
{
    /* a's four lane sums and b's, added across: the low 64 bits a's total, the high b's. */
    __m256i h = _mm256_add_epi64(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    *a_total = (uint64_t)_mm_cvtsi128_si64(t);
    *b_total = (uint64_t)_mm_extract_epi64(t, 1);
}

/* The scan with AVX2, for CPUs without AVX-512 VPOPCNTDQ: bytes XORed with the query, their bits
 * counted through a nibble table (AVX2 has no vector popcount), the byte counts summed by vpsadbw.
 * Rows of 48 bytes (384 dimensions) go two to three registers, four rows a turn; rows of a
 * multiple of 32 bytes up to 256 (2,048 dimensions), a register or more each, two rows a turn
 * (at most 8 registers a row: a byte's count stays under 256 until the sum). Other widths take the
 * popcnt loop. Integer counts: the same distances as the other loops, in the same order (`nearest`
 * over 100k rows of 48 bytes, with take_avx2: 0.65x the popcnt loop's CPU on an AVX2-only AMD
 * EPYC, bench/scan_loops.py). */
__attribute__((target("popcnt,avx2"))) static void scan_avx2(
    const uint8_t *query, const uint8_t *codes, Py_ssize_t n, Py_ssize_t width, const uint8_t *excluded,
    uint16_t *out)
{
    if (width != 48 && (width % 32 != 0 || width > 256)) {
        scan_popcnt(query, codes, n, width, excluded, out);
        return;
    }
    const __m256i table = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,
                                           0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
    const __m256i nibble = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
    const uint8_t *end = codes + n * width;
    Py_ssize_t r = 0;
    if (width == 48) {
        /* Two rows are 96 bytes, three registers: the query twice over, the middle register half
         * of each row (its low 128 bits the first row's, its high the second's). */
        uint8_t twice[96];
        memcpy(twice, query, 48);
        memcpy(twice + 48, query, 48);
        const __m256i q0 = _mm256_loadu_si256((const void *)twice), q1 = _mm256_loadu_si256((const void *)(twice + 32)),
                      q2 = _mm256_loadu_si256((const void *)(twice + 64)), first = _mm256_setr_epi64x(-1, -1, 0, 0);
        for (; r + 4 <= n; r += 4) {
            const uint8_t *rows = codes + r * 48;
            for (Py_ssize_t ahead = 0; ahead < 4 * 48; ahead += 64)
                if (SCAN_AHEAD + ahead < end - rows)
                    ENGRAM_PREFETCH(rows + SCAN_AHEAD + ahead);
            uint64_t counts[4];
            for (int pair = 0; pair < 2; pair++) {
                const uint8_t *two = rows + 96 * pair;
                __m256i c0 = AVX2_BYTE_COUNTS(_mm256_xor_si256(_mm256_loadu_si256((const void *)two), q0), table, nibble);
                __m256i c1 = AVX2_BYTE_COUNTS(_mm256_xor_si256(_mm256_loadu_si256((const void *)(two + 32)), q1), table, nibble);
                __m256i c2 = AVX2_BYTE_COUNTS(_mm256_xor_si256(_mm256_loadu_si256((const void *)(two + 64)), q2), table, nibble);
                __m256i a = _mm256_sad_epu8(_mm256_add_epi8(c0, _mm256_and_si256(c1, first)), zero);
                __m256i b = _mm256_sad_epu8(_mm256_add_epi8(c2, _mm256_andnot_si256(first, c1)), zero);
                avx2_two_totals(a, b, &counts[2 * pair], &counts[2 * pair + 1]);
            }
            for (int j = 0; j < 4; j++) {
                Py_ssize_t row = r + j, total = (Py_ssize_t)counts[j];
                KEEP_ROW(row, total)
            }
        }
    } else {
        Py_ssize_t blocks = width / 32;
        __m256i q[8];
        for (Py_ssize_t c = 0; c < blocks; c++)
            q[c] = _mm256_loadu_si256((const void *)(query + 32 * c));
        for (; r + 2 <= n; r += 2) {
            const uint8_t *a_row = codes + r * width, *b_row = a_row + width;
            for (Py_ssize_t ahead = 0; ahead < 2 * width; ahead += 64)
                if (SCAN_AHEAD + ahead < end - a_row)
                    ENGRAM_PREFETCH(a_row + SCAN_AHEAD + ahead);
            __m256i ca = zero, cb = zero;
            for (Py_ssize_t c = 0; c < blocks; c++) {
                ca = _mm256_add_epi8(ca, AVX2_BYTE_COUNTS(_mm256_xor_si256(_mm256_loadu_si256((const void *)(a_row + 32 * c)), q[c]), table, nibble));
                cb = _mm256_add_epi8(cb, AVX2_BYTE_COUNTS(_mm256_xor_si256(_mm256_loadu_si256((const void *)(b_row + 32 * c)), q[c]), table, nibble));
            }
            uint64_t total_a, total_b;
            avx2_two_totals(_mm256_sad_epu8(ca, zero), _mm256_sad_epu8(cb, zero), &total_a, &total_b);
            KEEP_ROW(r, total_a)
            KEEP_ROW(r + 1, total_b)
        }
    }
    for (; r < n; r++) {
        uint32_t total = row_distance(query, codes + r * width, width);
        KEEP_ROW(r, total)
    }
}
#endif

engram_scan_fn engram_select_scan(int level, const char **name)
{
#ifdef HAVE_X86_DOT
    if (level == 0 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq")
        && __builtin_cpu_supports("popcnt")) {
        *name = "avx512-vpopcntdq";
        return scan_avx512;
    }
    if (level <= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt")) {
        *name = "avx2";
        return scan_avx2;
    }
    if (level <= 2 && __builtin_cpu_supports("popcnt")) {
        *name = "popcnt";
        return scan_popcnt;
    }
#endif
    (void)level;
    *name = "portable";
    return scan_portable;
}

/* A per-thread buffer for the distances of a scan, kept between calls: a fresh one of 200 KB (100k
 * rows) would be mapped and faulted in anew by every search, which costs as much as the scan. */
static _Thread_local uint16_t *scratch_buf = NULL;
static _Thread_local Py_ssize_t scratch_len = 0;

uint16_t *engram_scratch(Py_ssize_t n)
{
    if (n > scratch_len || scratch_buf == NULL) {
        Py_ssize_t want = n + n / 4 + 1024; /* grow ahead of a growing index */
        uint16_t *grown = PyMem_RawRealloc(scratch_buf, (size_t)want * sizeof(uint16_t));
        if (grown == NULL)
            return NULL;
        scratch_buf = grown;
        scratch_len = want;
    }
    return scratch_buf;
}

/* IEEE half precision to single, exactly (portable; the x86 path below converts in hardware). */
float engram_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        float f = (float)mant * 5.9604644775390625e-8f; /* zero or subnormal: mant * 2^-24 */
        return sign ? -f : f;
    }
    bits = exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The dot products below are the same sum on every path and every CPU: each product of a float16
 * (11 significant bits) and a float32 or float64 is taken in float64 and summed in float64, so the
 * float32 result rounded from it is the float64 reference's to within one rounding (the order of
 * the additions changes the sum by ~1e-16 of its terms' size, not the float32 answer). Nothing is
 * accumulated in half or single precision, as some libraries' float16 kernels do. */

static double dot_portable(const uint16_t *v, const double *q, Py_ssize_t d)
{
    double acc[4] = {0};
    Py_ssize_t i = 0;
    for (; i + 4 <= d; i += 4)
        for (int j = 0; j < 4; j++)
            acc[j] += (double)engram_half_to_float(v[i + j]) * q[i + j];
    for (; i < d; i++)
        acc[0] += (double)engram_half_to_float(v[i]) * q[i];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static double self_dot_portable(const uint16_t *v, Py_ssize_t d)
{
    double acc[4] = {0};
    Py_ssize_t i = 0;
    for (; i + 4 <= d; i += 4)
        for (int j = 0; j < 4; j++) {
            double x = (double)engram_half_to_float(v[i + j]);
            acc[j] += x * x; /* exact: 22 significant bits */
        }
    for (; i < d; i++) {
        double x = (double)engram_half_to_float(v[i]);
        acc[0] += x * x;
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

#ifdef HAVE_X86_DOT
/* Eight float16 lanes converted in hardware, widened to two float64 vectors of four. */
#define WIDEN_LOW(h) _mm256_cvtps_pd(_mm256_castps256_ps128(h))
#define WIDEN_HIGH(h) _mm256_cvtps_pd(_mm256_extractf128_ps(h, 1))

__attribute__((target("avx2,fma,f16c")))
static double sum4(__m256d a)
{
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

/* The same sums, sixteen components at a time, on CPUs with AVX2, FMA and F16C. */
__attribute__((target("avx2,fma,f16c")))
static double dot_x86(const uint16_t *v, const double *q, Py_ssize_t d)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
    Py_ssize_t i = 0;
    for (; i + 16 <= d; i += 16) {
        __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i)));
        __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i + 8)));
        a0 = _mm256_fmadd_pd(WIDEN_LOW(x0), _mm256_loadu_pd(q + i), a0);
        a1 = _mm256_fmadd_pd(WIDEN_HIGH(x0), _mm256_loadu_pd(q + i + 4), a1);
        a2 = _mm256_fmadd_pd(WIDEN_LOW(x1), _mm256_loadu_pd(q + i + 8), a2);
        a3 = _mm256_fmadd_pd(WIDEN_HIGH(x1), _mm256_loadu_pd(q + i + 12), a3);
    }
    double sum = sum4(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    for (; i < d; i++)
        sum += (double)engram_half_to_float(v[i]) * q[i];
    return sum;
}

__attribute__((target("avx2,fma,f16c")))
static double self_dot_x86(const uint16_t *v, Py_ssize_t d)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    Py_ssize_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i)));
        __m256d lo = WIDEN_LOW(x), hi = WIDEN_HIGH(x);
        a0 = _mm256_fmadd_pd(lo, lo, a0);
        a1 = _mm256_fmadd_pd(hi, hi, a1);
    }
    double sum = sum4(_mm256_add_pd(a0, a1));
    for (; i < d; i++) {
        double x = (double)engram_half_to_float(v[i]);
        sum += x * x;
    }
    return sum;
}

static int have_x86_dot(void)
{
    /* F16C comes with AVX2 and FMA on every CPU that has both; GCC can ask (a hypervisor may hide
     * it), clang's __builtin_cpu_supports does not know the name. */
#if defined(__clang__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#endif
}
#endif

engram_dot_fn engram_select_dot(int portable, const char **name)
{
#ifdef HAVE_X86_DOT
    if (!portable && have_x86_dot()) {
        *name = "avx2+fma+f16c";
        return dot_x86;
    }
#endif
    (void)portable;
    *name = "portable";
    return dot_portable;
}

engram_self_dot_fn engram_select_self_dot(int portable)
{
#ifdef HAVE_X86_DOT
    if (!portable && have_x86_dot())
        return self_dot_x86;
#endif
    (void)portable;
    return self_dot_portable;
}
