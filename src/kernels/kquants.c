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
        uint8_t sc[8], mn[8];
        bk_kq_scales_mins(x[i].scales, sc, mn);

        /* mins: lane k = mn[2k] * S(2k) + mn[2k+1] * S(2k+1) */
        const __m128i bs_lo = _mm_loadu_si128((const __m128i *)y[i].bsums);
        const __m128i bs_hi = _mm_loadu_si128((const __m128i *)y[i].bsums + 1);
        const __m128i s32 = _mm_hadd_epi16(bs_lo, bs_hi);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn));
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

float bk_dot_q6_K_q8_K(int n, const void *vx, const void *vy) {
    const bk_block_q6_K *x = (const bk_block_q6_K *)vx;
    const bk_block_q8_K *y = (const bk_block_q8_K *)vy;
    const int nb = n / BK_QK_K;
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const float d = y[i].d * bk_h2f(x[i].d);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const __m256i offset = _mm256_slli_epi32(
            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), sc16), 5);
        __m256i sumi = _mm256_setzero_si256();
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        for (int j = 0; j < 2; j++, ql += 64, qh += 32, q8 += 128) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m15), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m15), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
            for (int t = 0; t < 4; t++) {
                const int s = 8 * j + 2 * t; /* scale of the chunk's first 16 elements */
                const __m256i p16 = _mm256_maddubs_epi16(q[t], _mm256_loadu_si256((const __m256i *)(q8 + 32 * t)));
                const __m256i scv = _mm256_setr_epi16(x[i].scales[s], x[i].scales[s], x[i].scales[s], x[i].scales[s],
                                                      x[i].scales[s], x[i].scales[s], x[i].scales[s], x[i].scales[s],
                                                      x[i].scales[s + 1], x[i].scales[s + 1], x[i].scales[s + 1],
                                                      x[i].scales[s + 1], x[i].scales[s + 1], x[i].scales[s + 1],
                                                      x[i].scales[s + 1], x[i].scales[s + 1]);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scv, p16));
            }
        }
        sumi = _mm256_sub_epi32(sumi, offset);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return bk_kq_hsum8(acc);
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
