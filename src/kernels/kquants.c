/* Q8_K activations and the Q4_K / Q6_K dot products; the float order of each function is in kquants.h. */
#include "kquants.h"
#include "fp16.h"
#include "kq_simd.h"

#include <immintrin.h>
#include <string.h>

/* ---------------------------------------------------------------- Q8_K */

/* 32 int32 -> 32 int8 in element order (values already in -127..127) */
static inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline float block_amax(const float *x) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < BK_QK_K; j += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + j), absmask));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

void bk_quant_row_q8_K(const float *x, void *vy, int64_t k) {
    bk_block_q8_K *y = (bk_block_q8_K *)vy;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int64_t i = 0; i < k / BK_QK_K; i++, x += BK_QK_K) {
        const float amax = block_amax(x);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        /* the first element with the largest magnitude, sign kept */
        float max = 0.0f;
        const __m256 va = _mm256_set1_ps(amax);
        for (int j = 0; j < BK_QK_K; j += 8) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), absmask), va, _CMP_EQ_OQ));
            if (hit) {
                max = x[j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vi = _mm256_set1_ps(iscale);
        const __m256i q127 = _mm256_set1_epi32(127);
        for (int j = 0; j < BK_QK_K; j += 32) {
            __m256i q[4];
            for (int t = 0; t < 4; t++) {
                const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * t), vi);
                q[t] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), q127);
            }
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), pack32(q[0], q[1], q[2], q[3]));
        }
        for (int g = 0; g < BK_QK_K / 16; g++) {
            int s = 0;
            for (int t = 0; t < 16; t++) s += y[i].qs[16 * g + t];
            y[i].bsums[g] = (int16_t)s;
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---------------------------------------------------------------- Q4_K x Q8_K */

float bk_dot_q4_K_q8_K(int n, const void *vx, const void *vy) {
    const bk_block_q4_K *x = (const bk_block_q4_K *)vx;
    const bk_block_q8_K *y = (const bk_block_q8_K *)vy;
    const int nb = n / BK_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const float d = y[i].d * bk_h2f(x[i].d);
        const float dmin = -(y[i].d * bk_h2f(x[i].dmin));
        const __m128i scmn = bk_kq_scales_mins16(x[i].scales);
        uint8_t sc[8];
        _mm_storel_epi64((__m128i *)sc, scmn);

        /* mins: lane k = mn[2k] * S(2k) + mn[2k+1] * S(2k+1) */
        const __m128i bs_lo = _mm_loadu_si128((const __m128i *)y[i].bsums);
        const __m128i bs_hi = _mm_loadu_si128((const __m128i *)y[i].bsums + 1);
        const __m128i s32 = _mm_hadd_epi16(bs_lo, bs_hi);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(scmn, 8));
        accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_madd_epi16(mins, s32)), accm);

        __m256i sumi = _mm256_setzero_si256();
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        for (int c = 0; c < 4; c++, q4 += 32, q8 += 64) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)q4);
            const __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(bits, m4), _mm256_loadu_si256((const __m256i *)q8));
            const __m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4),
                                                    _mm256_loadu_si256((const __m256i *)(q8 + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c]), lo));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * c + 1]), hi));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return bk_kq_hsum8(acc) + bk_kq_hsum4(accm);
}

/* ---------------------------------------------------------------- Q6_K x Q8_K */

/* shuffle masks: bytes 0..7 = scale 2K, bytes 8..15 = scale 2K+1 (K = 32-element chunk) */
static const uint8_t q6_scale_shuffle[8][16] = {
#define Q6S(a) {a, a, a, a, a, a, a, a, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1}
    Q6S(0), Q6S(2), Q6S(4), Q6S(6), Q6S(8), Q6S(10), Q6S(12), Q6S(14)
#undef Q6S
};

/* The eight 32-element chunks of a Q6_K block as unsigned 6-bit values (q, without the -32) */
static inline void q6_chunks(const bk_block_q6_K *b, __m256i q[8]) {
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    for (int j = 0; j < 2; j++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * j));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * j + 32));
        const __m256i h = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * j));
        /* the 16-bit shifts move bits across bytes only into positions the masks clear */
        q[4 * j + 0] = _mm256_or_si256(_mm256_and_si256(l0, m15), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
        q[4 * j + 1] = _mm256_or_si256(_mm256_and_si256(l1, m15),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
        q[4 * j + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
        q[4 * j + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
    }
}

/* A tile of one Q6_K row against C activation columns (C <= 4, a constant after inlining), each output in the
 * single dot product's order: s[c*s_col]. */
static inline __attribute__((always_inline)) void q6_tile(int C, int nb, float *s, int64_t s_col,
                                                          const bk_block_q6_K *x, const uint8_t *y, size_t by) {
    __m256 acc[4];
    for (int c = 0; c < C; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m256i q[8], sumi[4];
        q6_chunks(&x[i], q);
        for (int c = 0; c < C; c++) sumi[c] = _mm256_setzero_si256();
        for (int K = 0; K < 8; K++) {
            const __m256i scv = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_loadu_si128((const __m128i *)q6_scale_shuffle[K])));
            for (int c = 0; c < C; c++) {
                const bk_block_q8_K *yb = (const bk_block_q8_K *)(y + c * by) + i;
                const __m256i p16 = _mm256_maddubs_epi16(q[K], _mm256_loadu_si256((const __m256i *)(yb->qs + 32 * K)));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(scv, p16));
            }
        }
        const float xd = bk_h2f(x[i].d);
        for (int c = 0; c < C; c++) {
            const bk_block_q8_K *yb = (const bk_block_q8_K *)(y + c * by) + i;
            /* the -32 offset: 32 * (bsums[2l] * sc[2l] + bsums[2l+1] * sc[2l+1]) per lane */
            const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)yb->bsums), sc16), 5);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(yb->d * xd), _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi[c], off)), acc[c]);
        }
    }
    for (int c = 0; c < C; c++) s[c * s_col] = bk_kq_hsum8(acc[c]);
}

float bk_dot_q6_K_q8_K(int n, const void *vx, const void *vy) {
    float s;
    q6_tile(1, n / BK_QK_K, &s, 0, (const bk_block_q6_K *)vx, (const uint8_t *)vy, 0);
    return s;
}

void bk_gemm_q6_K_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *vx, size_t bx, const void *vy,
                       size_t by) {
    BK_KQ_GEMM_ROW_TILES(q6_tile, bk_block_q6_K, n / BK_QK_K, s, s_col, nr, nc, vx, bx, vy, by);
}

/* ---------------------------------------------------------------- several rows */

void bk_dot_q4_K_q8_K_rows(int n, float *s, int nr, const void *vx, size_t bx, const void *vy) {
    const uint8_t *x = (const uint8_t *)vx;
    for (int r = 0; r < nr; r++) s[r] = bk_dot_q4_K_q8_K(n, x + (size_t)r * bx, vy);
}

void bk_dot_q6_K_q8_K_rows(int n, float *s, int nr, const void *vx, size_t bx, const void *vy) {
    const uint8_t *x = (const uint8_t *)vx;
    for (int r = 0; r < nr; r++) s[r] = bk_dot_q6_K_q8_K(n, x + (size_t)r * bx, vy);
}
