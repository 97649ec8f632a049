/* The kernels of rows8.c, compiled for two integer-lane instruction sets: SFX names the variant, LANES_US(u, s)
 * gives the eight exact int32 sums of 4 products of unsigned u by signed s, as floats; X8_NO_Q8_0_SIGN_TRICK leaves
 * out the Q8_0 kernel (the VNNI build has its own). Not a public header. */

/* Q4_1x8 against NC (1 or 2) columns */
static inline __attribute__((always_inline)) void SFX(x8_q4_1_cols)(int NC, int nb, const uint8_t *g,
                                                                    const uint8_t *a, size_t a_col, float *out,
                                                                    int64_t out_col) {
    __m256 acc[2][8], summ[2];
    for (int c = 0; c < NC; c++) {
        summ[c] = _mm256_setzero_ps();
        for (int j = 0; j < 8; j++) acc[c][j] = _mm256_setzero_ps();
    }
    const __m256i low = _mm256_set1_epi8(0x0F);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = g + (size_t)b * BK_X8_Q4_1_BLOCK;
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16)));
        __m256i w[8];
        for (int c4 = 0; c4 < 4; c4++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * c4));
            w[c4] = _mm256_and_si256(q, low);
            w[c4 + 4] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
        }
        for (int c = 0; c < NC; c++) {
            const bk_block_q8_1 *y = (const bk_block_q8_1 *)(a + c * a_col) + b;
            const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(bk_h2f(y->d)));
            summ[c] = _mm256_fmadd_ps(m, _mm256_set1_ps(bk_h2f(y->s)), summ[c]);
            const int32_t *yq = (const int32_t *)y->qs;
            for (int j = 0; j < 8; j++)
                acc[c][j] = _mm256_fmadd_ps(dd, LANES_US(w[j], _mm256_set1_epi32(yq[j])), acc[c][j]);
        }
    }
    for (int c = 0; c < NC; c++) {
        const __m256 h = x8_lane_sum(acc[c]);
        _mm256_storeu_ps(out + c * out_col, _mm256_add_ps(h, summ[c]));
    }
}

#ifndef X8_NO_Q8_0_SIGN_TRICK
/* Q8_0x8 against NC (1 or 2) columns: ggml's sign trick, |x| times y with x's sign moved onto y */
static inline __attribute__((always_inline)) void SFX(x8_q8_0_cols)(int NC, int nb, const uint8_t *g,
                                                                    const uint8_t *a, size_t a_col, float *out,
                                                                    int64_t out_col) {
    __m256 acc[2][8];
    for (int c = 0; c < NC; c++)
        for (int j = 0; j < 8; j++) acc[c][j] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = g + (size_t)b * BK_X8_Q8_0_BLOCK;
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        __m256 dd[2];
        const int32_t *yq[2];
        for (int c = 0; c < NC; c++) {
            const bk_block_q8_0 *y = (const bk_block_q8_0 *)(a + c * a_col) + b;
            dd[c] = _mm256_mul_ps(d, _mm256_set1_ps(bk_h2f(y->d)));
            yq[c] = (const int32_t *)y->qs;
        }
        for (int j = 0; j < 8; j++) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * j));
            const __m256i ux = _mm256_sign_epi8(x, x);
            for (int c = 0; c < NC; c++)
                acc[c][j] = _mm256_fmadd_ps(dd[c], LANES_US(ux, _mm256_sign_epi8(_mm256_set1_epi32(yq[c][j]), x)),
                                            acc[c][j]);
        }
    }
    for (int c = 0; c < NC; c++) {
        const __m256 h = x8_lane_sum(acc[c]);
        _mm256_storeu_ps(out + c * out_col, h);
    }
}
#endif

/* row groups in panels of 8 (64 rows, whose blocks stay in L1/L2 while the columns pass), columns by CMAX */
#define X8_DRIVER(NAME, COLS, BLOCK, CMAX)                                                                       \
    static void NAME(int k, const uint8_t *x8, int64_t g0, int64_t g1, const uint8_t *a, size_t a_col, int n,   \
                     float *out, int64_t out_col) {                                                              \
        const int nb = k / BK_QK;                                                                                \
        const size_t gbytes = (size_t)nb * BLOCK;                                                                \
        for (int64_t p0 = g0; p0 < g1; p0 += 8) {                                                                \
            const int64_t p1 = g1 - p0 < 8 ? g1 : p0 + 8;                                                        \
            for (int c = 0; c < n; c += CMAX) {                                                                  \
                const int nc = n - c >= CMAX ? CMAX : n - c;                                                     \
                for (int64_t g = p0; g < p1; g++) {                                                              \
                    const uint8_t *gp = x8 + (size_t)g * gbytes;                                                 \
                    float *o = out + c * out_col + g * 8;                                                        \
                    if (nc == 2) COLS(2, nb, gp, a + c * a_col, a_col, o, out_col);                              \
                    else COLS(1, nb, gp, a + c * a_col, a_col, o, out_col);                                      \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
    }
