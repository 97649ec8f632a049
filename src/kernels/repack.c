/* Repacked Q4_K (q4_K_8x8) and its gemv / gemm against Q8_K activations; the float orders are in repack.h. */
#include "repack.h"
#include "quants.h"
#include "fp16.h"
#include "kq_simd.h"

#include <immintrin.h>
#include <string.h>

#define QKB BK_QK_K

int bk_repack_q4_K_takes(int64_t m, int32_t k) { return m > 0 && m % 8 == 0 && k > 0 && k % QKB == 0; }

size_t bk_act_row_bytes_q8_K(int32_t k) { return (size_t)(k / QKB) * sizeof(bk_block_q8_K); }

/* ---------------------------------------------------------------- repack (load time) */

/* pack 8 six-bit scales (one per row) and 8 six-bit mins into Q4_K's 12-byte layout */
static void pack_scales(const uint8_t *s, const uint8_t *m, uint8_t *out) {
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)((s[j] & 63) | ((s[j + 4] & 48) << 2));
        out[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] & 48) << 2));
        out[j + 8] = (uint8_t)((s[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

static void repack_block(const bk_block_q4_K *const *in, bk_block_q4_Kx8 *out) {
    uint8_t sc[8][8], mn[8][8]; /* [row][sub-block] */
    for (int j = 0; j < 8; j++) {
        out->d[j] = in[j]->d;
        out->dmin[j] = in[j]->dmin;
        bk_kq_scales_mins(in[j]->scales, sc[j], mn[j]);
    }
    for (int s = 0; s < 8; s++) {
        uint8_t ss[8], mm[8];
        for (int j = 0; j < 8; j++) {
            ss[j] = sc[j][s];
            mm[j] = mn[j][s];
        }
        pack_scales(ss, mm, out->scales + 12 * s);
    }
    for (int g = 0; g < 16; g++)
        for (int j = 0; j < 8; j++) memcpy(out->qs + 64 * g + 8 * j, in[j]->qs + 8 * g, 8);
}

int bk_repack_q4_K_8x8(const void *src, void *dst, int64_t m, int32_t k, int ith, int nth) {
    if (!bk_repack_q4_K_takes(m, k)) return -1;
    const int64_t nb = k / QKB, ngroups = m / 8;
    const bk_block_q4_K *s = (const bk_block_q4_K *)src;
    bk_block_q4_Kx8 *d = (bk_block_q4_Kx8 *)dst;
    const int64_t g0 = ngroups * ith / nth, g1 = ngroups * (ith + 1) / nth;
    for (int64_t g = g0; g < g1; g++)
        for (int64_t b = 0; b < nb; b++) {
            const bk_block_q4_K *in[8];
            for (int j = 0; j < 8; j++) in[j] = s + (8 * g + j) * nb + b;
            repack_block(in, d + g * nb + b);
        }
    return 0;
}

/* ---------------------------------------------------------------- activations, four rows interleaved */

void bk_quant_mat_q8_K_4x8(const float *x, int64_t x_row, void *vy, int64_t k) {
    bk_block_q8_Kx4 *y = (bk_block_q8_Kx4 *)vy;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int64_t b = 0; b < k / QKB; b++) {
        int8_t q[4][QKB];
        for (int r = 0; r < 4; r++) {
            const float *xr = x + r * x_row + b * QKB;
            __m256 m = _mm256_setzero_ps();
            for (int j = 0; j < QKB; j += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xr + j), absmask));
            __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            const float amax = _mm_cvtss_f32(m4);
            /* the sign rule of the AVX2 code: negative scale when +amax occurs anywhere */
            int pos = 0;
            const __m256 va = _mm256_set1_ps(amax);
            for (int j = 0; j < QKB && !pos; j += 8)
                pos = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(xr + j), va, _CMP_EQ_OQ));
            float iscale = amax != 0.0f ? 127.0f / amax : 0.0f;
            if (pos) iscale = amax != 0.0f ? -127.0f / amax : 0.0f;
            y[b].d[r] = amax != 0.0f ? 1.0f / iscale : 0.0f;
            const __m256 vi = _mm256_set1_ps(iscale);
            for (int j = 0; j < QKB; j += 32) {
                __m256i t[4];
                for (int u = 0; u < 4; u++)
                    t[u] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + j + 8 * u), vi),
                                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
                const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(t[0], t[1]), _mm256_packs_epi32(t[2], t[3]));
                _mm256_storeu_si256((__m256i *)(q[r] + j),
                                    _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
            }
        }
        for (int J = 0; J < 32; J++)
            for (int r = 0; r < 4; r++) memcpy(y[b].qs + 32 * J + 8 * r, q[r] + 8 * J, 8);
        for (int t = 0; t < 4; t++)
            for (int r = 0; r < 4; r++)
                for (int u = 0; u < 4; u++) {
                    int s = 0;
                    for (int e = 0; e < 16; e++) s += q[r][64 * t + 16 * u + e];
                    y[b].bsums[16 * t + 4 * r + u] = (int16_t)s;
                }
    }
}

void bk_act_prepare_q4_K_8x8(const float *x, int64_t x_col, int n, int32_t k, void *dst, int ith, int nth) {
    const size_t rb = bk_act_row_bytes_q8_K(k);
    uint8_t *d = (uint8_t *)dst;
    const int n4 = n - n % 4;
    for (int c = 4 * ith; c < n4; c += 4 * nth) bk_quant_mat_q8_K_4x8(x + c * x_col, x_col, d + c * rb, k);
    for (int c = n4 + ith; c < n; c += nth) bk_quant_row_q8_K(x + c * x_col, d + c * rb, k);
}

/* ---------------------------------------------------------------- shared pieces of gemv / gemm */

/* Decoded scales of one bk_block_q4_Kx8: for sub-block s, int16 vectors of the scale of rows 0..3 (lo) and
 * 4..7 (hi), each row's value repeated over its 64-bit lane (the lane layout of the maddubs products below);
 * and the mins as int16 pairs (mn[2p][j], mn[2p+1][j]) per row j for madd against (S(2p), S(2p+1)). */
typedef struct {
    __m256i sc_lo[8], sc_hi[8];
    __m256i mn_pair[4];
} scales_t;

static inline void decode_scales(const bk_block_q4_Kx8 *b, scales_t *o) {
    const __m128i lo_idx = _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m128i hi_idx = _mm_setr_epi8(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7);
    __m128i v[8]; /* sub-block s: bytes 0..7 the rows' scales, 8..15 their mins */
    for (int s = 0; s < 8; s++) {
        v[s] = bk_kq_scales_mins16(b->scales + 12 * s);
        o->sc_lo[s] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v[s], lo_idx));
        o->sc_hi[s] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v[s], hi_idx));
    }
    for (int p = 0; p < 4; p++)
        o->mn_pair[p] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(v[2 * p], v[2 * p + 1]));
}

/* 8 int32, two per row (rows 0..3 in a, 4..7 in b, lanes [r0 r0 r1 r1 | r2 r2 r3 r3]) -> one per row, in order */
static inline __m256i rows8(__m256i a, __m256i b) {
    return _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(a, b), _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
}

/* The nibbles of sub-blocks 2p (low) and 2p+1 (high) of one repacked super-block, as bytes:
 * nib[4u + 0 / 1] = low nibbles of byte group 4p + u for rows 0..3 / 4..7, nib[4u + 2 / 3] = the high ones. */
static inline void pair_nibbles(const uint8_t *qs, int p, __m256i nib[16]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int u = 0; u < 4; u++) {
        const int g = 4 * p + u;
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(qs + 64 * g));      /* rows 0..3 */
        const __m256i w1 = _mm256_loadu_si256((const __m256i *)(qs + 64 * g + 32)); /* rows 4..7 */
        nib[4 * u + 0] = _mm256_and_si256(w0, m4);
        nib[4 * u + 1] = _mm256_and_si256(w1, m4);
        nib[4 * u + 2] = _mm256_and_si256(_mm256_srli_epi16(w0, 4), m4);
        nib[4 * u + 3] = _mm256_and_si256(_mm256_srli_epi16(w1, 4), m4);
    }
}

/* The integer sums of sub-blocks 2p and 2p+1 against one activation row, each scaled by its sub-block scale,
 * added in 32 bits: two lanes a row for rows 0..3 (*a) and 4..7 (*b). act_lo[u] / act_hi[u]: the 8 activation
 * bytes that meet the low / high nibbles of byte group 4p + u, broadcast to the four 64-bit lanes. */
static inline void pair_sums(const __m256i nib[16], int p, const __m256i *act_lo, const __m256i *act_hi,
                             const scales_t *S, __m256i *a, __m256i *b) {
    __m256i l0 = _mm256_setzero_si256(), l1 = l0, h0 = l0, h1 = l0;
    for (int u = 0; u < 4; u++) {
        /* int16 sums of 8 products each: |sum| <= 8 * 15 * 127, no overflow */
        l0 = _mm256_add_epi16(l0, _mm256_maddubs_epi16(nib[4 * u + 0], act_lo[u]));
        l1 = _mm256_add_epi16(l1, _mm256_maddubs_epi16(nib[4 * u + 1], act_lo[u]));
        h0 = _mm256_add_epi16(h0, _mm256_maddubs_epi16(nib[4 * u + 2], act_hi[u]));
        h1 = _mm256_add_epi16(h1, _mm256_maddubs_epi16(nib[4 * u + 3], act_hi[u]));
    }
    *a = _mm256_add_epi32(_mm256_madd_epi16(l0, S->sc_lo[2 * p]), _mm256_madd_epi16(h0, S->sc_lo[2 * p + 1]));
    *b = _mm256_add_epi32(_mm256_madd_epi16(l1, S->sc_hi[2 * p]), _mm256_madd_epi16(h1, S->sc_hi[2 * p + 1]));
}

static inline __m256i bcast8(const int8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_set1_epi64x(v);
}

/* ---------------------------------------------------------------- gemv */

void bk_gemv_q4_K_8x8_q8_K(int32_t k, float *s, const void *w, const void *vy, int64_t r0, int64_t r1) {
    const int64_t nb = k / QKB;
    const bk_block_q8_K *y = (const bk_block_q8_K *)vy;
    const bk_block_q4_Kx8 *wb = (const bk_block_q4_Kx8 *)w;
    for (int64_t g = r0 / 8; g < r1 / 8; g++) {
        __m256 A = _mm256_setzero_ps(), B = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const bk_block_q4_Kx8 *x = wb + g * nb + b;
            scales_t S;
            decode_scales(x, &S);
            __m256i ia = _mm256_setzero_si256(), ib = ia, im = ia;
            /* the mins' pairs (S(2p), S(2p+1)), S(s) = bsums[2s] + bsums[2s+1], as one int32 each */
            int32_t sp[4];
            _mm_storeu_si128((__m128i *)sp, _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[b].bsums),
                                                           _mm_loadu_si128((const __m128i *)y[b].bsums + 1)));
            for (int p = 0; p < 4; p++) {
                __m256i alo[4], ahi[4];
                for (int u = 0; u < 4; u++) {
                    alo[u] = bcast8(y[b].qs + 64 * p + 8 * u);
                    ahi[u] = bcast8(y[b].qs + 64 * p + 32 + 8 * u);
                }
                __m256i nib[16], a, c;
                pair_nibbles(x->qs, p, nib);
                pair_sums(nib, p, alo, ahi, &S, &a, &c);
                ia = _mm256_add_epi32(ia, a);
                ib = _mm256_add_epi32(ib, c);
                im = _mm256_add_epi32(im, _mm256_madd_epi16(S.mn_pair[p], _mm256_set1_epi32(sp[p])));
            }
            const __m256 yd = _mm256_set1_ps(y[b].d);
            const __m256 D = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
            const __m256 M = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->dmin));
            A = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows8(ia, ib)), _mm256_mul_ps(D, yd), A);
            B = _mm256_fmadd_ps(_mm256_cvtepi32_ps(im), _mm256_mul_ps(M, yd), B);
        }
        _mm256_storeu_ps(s + 8 * g, _mm256_sub_ps(A, B));
    }
}

/* ---------------------------------------------------------------- gemm */

void bk_gemm_q4_K_8x8_q8_K(int32_t k, float *s, int64_t s_col, const void *w, const void *vy, int n4, int64_t r0,
                           int64_t r1) {
    const int64_t nb = k / QKB;
    const bk_block_q4_Kx8 *wb = (const bk_block_q4_Kx8 *)w;
    /* up to 16 activation rows (four block_q8_Kx4 groups) share each decoded weight super-block */
    for (int t0 = 0; t0 < n4; t0 += 16) {
        const int ng = (n4 - t0 < 16 ? n4 - t0 : 16) / 4;
        const bk_block_q8_Kx4 *y0 = (const bk_block_q8_Kx4 *)vy + (t0 / 4) * nb;
        for (int64_t g = r0 / 8; g < r1 / 8; g++) {
            __m256 A[16], B[16];
            for (int r = 0; r < 4 * ng; r++) A[r] = B[r] = _mm256_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                const bk_block_q4_Kx8 *x = wb + g * nb + b;
                scales_t S;
                decode_scales(x, &S);
                const __m256 D = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->d));
                const __m256 M = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x->dmin));
                for (int p = 0; p < 4; p++) {
                    __m256i nib[16]; /* shared by the activation rows */
                    pair_nibbles(x->qs, p, nib);
                    for (int q = 0; q < ng; q++) {
                        const bk_block_q8_Kx4 *y = y0 + q * nb + b;
                        /* S(2p), S(2p+1) of row r: bsums[16p + 4r + 0..3] pairwise */
                        int32_t sp[4];
                        _mm_storeu_si128((__m128i *)sp,
                                         _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(y->bsums + 16 * p)),
                                                        _mm_loadu_si128((const __m128i *)(y->bsums + 16 * p + 8))));
                        for (int r = 0; r < 4; r++) {
                            __m256i alo[4], ahi[4];
                            for (int u = 0; u < 4; u++) {
                                alo[u] = bcast8(y->qs + 256 * p + 32 * u + 8 * r);
                                ahi[u] = bcast8(y->qs + 256 * p + 32 * (u + 4) + 8 * r);
                            }
                            __m256i a, c;
                            pair_sums(nib, p, alo, ahi, &S, &a, &c);
                            const __m256i im = _mm256_madd_epi16(S.mn_pair[p], _mm256_set1_epi32(sp[r]));
                            const __m256 yd = _mm256_set1_ps(y->d[r]);
                            /* fl(D * y.d) and fl(M * y.d), then one fma each, per pair of sub-blocks */
                            A[4 * q + r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows8(a, c)), _mm256_mul_ps(D, yd), A[4 * q + r]);
                            B[4 * q + r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(im), _mm256_mul_ps(M, yd), B[4 * q + r]);
                        }
                    }
                }
            }
            for (int r = 0; r < 4 * ng; r++) _mm256_storeu_ps(s + (t0 + r) * s_col + 8 * g, _mm256_sub_ps(A[r], B[r]));
        }
    }
}

/* ---------------------------------------------------------------- the node */

void bk_matmul_q4_K_8x8(const void *w, int32_t k, const void *act, int n, int64_t r0, int64_t r1, float *out,
                        int64_t out_col) {
    const size_t rb = bk_act_row_bytes_q8_K(k);
    const int n4 = n > 3 ? n - n % 4 : 0;
    if (n4) bk_gemm_q4_K_8x8_q8_K(k, out, out_col, w, act, n4, r0, r1);
    for (int t = n4; t < n; t++)
        bk_gemv_q4_K_8x8_q8_K(k, out + t * out_col, w, (const uint8_t *)act + t * rb, r0, r1);
}

/* ---------------------------------------------------------------- Q4_0, q4_0_8x8 */

int bk_repack_q4_0_takes(int64_t m, int32_t k) { return m > 0 && m % 8 == 0 && k > 0 && k % 32 == 0; }

int bk_repack_q4_0_8x8(const void *src, void *dst, int64_t m, int32_t k, int ith, int nth) {
    return bk_repack_b32_8x8(src, dst, m, k, 0x88, ith, nth);
}

int bk_repack_b32_8x8(const void *src, void *dst, int64_t m, int32_t k, uint8_t flip, int ith, int nth) {
    if (!bk_repack_q4_0_takes(m, k)) return -1;
    const int64_t nb = k / 32, ngroups = m / 8;
    const bk_block_q4_0 *s = (const bk_block_q4_0 *)src;
    bk_block_q4_0x8 *d = (bk_block_q4_0x8 *)dst;
    const int64_t g0 = ngroups * ith / nth, g1 = ngroups * (ith + 1) / nth;
    for (int64_t g = g0; g < g1; g++)
        for (int64_t b = 0; b < nb; b++) {
            bk_block_q4_0x8 *o = d + g * nb + b;
            for (int j = 0; j < 8; j++) {
                const bk_block_q4_0 *in = s + (8 * g + j) * nb + b;
                o->d[j] = in->d;
                for (int h = 0; h < 2; h++)
                    for (int e = 0; e < 8; e++) o->qs[64 * h + 8 * j + e] = in->qs[8 * h + e] ^ flip;
            }
        }
    return 0;
}

/* C activation columns (C <= 4, a constant after inlining) against one 8-row group. The integer dot is taken
 * with the unsigned nibbles q = stored ^ 8: sum (q - 8) y = sum q y - 8 sum y, exact. */
static inline __attribute__((always_inline)) void q4_0_tile(int C, int nb, const bk_block_q4_0x8 *x,
                                                            const uint8_t *act, size_t act_col, float *out,
                                                            int64_t out_col) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), x88 = _mm256_set1_epi8((char)0x88);
    __m256 A[4];
    for (int c = 0; c < C; c++) A[c] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i q[8]; /* [h][low/high][rows 0-3 / 4-7] */
        for (int h = 0; h < 2; h++) {
            const __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x[b].qs + 64 * h)), x88);
            const __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(x[b].qs + 64 * h + 32)), x88);
            q[4 * h + 0] = _mm256_and_si256(w0, m4);
            q[4 * h + 1] = _mm256_and_si256(w1, m4);
            q[4 * h + 2] = _mm256_and_si256(_mm256_srli_epi16(w0, 4), m4);
            q[4 * h + 3] = _mm256_and_si256(_mm256_srli_epi16(w1, 4), m4);
        }
        const __m256 D = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].d));
        for (int c = 0; c < C; c++) {
            const bk_block_q8_0 *y = (const bk_block_q8_0 *)(act + c * act_col) + b;
            __m256i lo = _mm256_setzero_si256(), hi = lo;
            for (int h = 0; h < 2; h++) {
                const __m256i ya = bcast8(y->qs + 8 * h), yb = bcast8(y->qs + 16 + 8 * h);
                lo = _mm256_add_epi16(lo, _mm256_add_epi16(_mm256_maddubs_epi16(q[4 * h + 0], ya),
                                                           _mm256_maddubs_epi16(q[4 * h + 2], yb)));
                hi = _mm256_add_epi16(hi, _mm256_add_epi16(_mm256_maddubs_epi16(q[4 * h + 1], ya),
                                                           _mm256_maddubs_epi16(q[4 * h + 3], yb)));
            }
            int ysum = 0;
            for (int e = 0; e < 32; e++) ysum += y->qs[e];
            const __m256i ones = _mm256_set1_epi16(1);
            const __m256i I = _mm256_sub_epi32(rows8(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones)),
                                               _mm256_set1_epi32(8 * ysum));
            A[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I), _mm256_mul_ps(D, _mm256_set1_ps(bk_h2f(y->d))), A[c]);
        }
    }
    for (int c = 0; c < C; c++) _mm256_storeu_ps(out + c * out_col, A[c]);
}

void bk_matmul_q4_0_8x8(const void *w, int32_t k, const void *act, size_t act_col, int n, int64_t r0, int64_t r1,
                        float *out, int64_t out_col) {
    const int64_t nb = k / 32;
    const bk_block_q4_0x8 *wb = (const bk_block_q4_0x8 *)w;
    const uint8_t *a = (const uint8_t *)act;
    for (int t = 0; t < n; t += 4) {
        const int C = n - t < 4 ? n - t : 4;
        for (int64_t g = r0 / 8; g < r1 / 8; g++) {
            float *o = out + t * out_col + 8 * g;
            const uint8_t *at = a + t * act_col;
            if (C == 4) q4_0_tile(4, nb, wb + g * nb, at, act_col, o, out_col);
            else if (C == 3) q4_0_tile(3, nb, wb + g * nb, at, act_col, o, out_col);
            else if (C == 2) q4_0_tile(2, nb, wb + g * nb, at, act_col, o, out_col);
            else q4_0_tile(1, nb, wb + g * nb, at, act_col, o, out_col);
        }
    }
}
