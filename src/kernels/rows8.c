/* Weights regrouped by 8 rows and their matmul kernels (see rows8.h). The kernel bodies are in rows8_body.h,
 * built for AVX2 lanes (vpmaddubsw + vpmaddwd, ggml's) and for AVX512-VNNI lanes (vpdpbusd on 256-bit
 * registers, 32 of them), picked once at run time (bk_x8_uses_vnni). */
#include "rows8.h"
#include "fp16.h"
#include "quants.h"
#include "simd_common.h"

#include <immintrin.h>
#include <string.h>

size_t bk_x8_bytes(int32_t wtype, int64_t m, int32_t k) {
    const size_t per = wtype == 3 ? BK_X8_Q4_1_BLOCK : BK_X8_Q8_0_BLOCK;
    return (size_t)(m / 8) * (size_t)(k / BK_QK) * per;
}

void bk_x8_pack(int32_t wtype, const void *w, size_t row_bytes, int32_t k, int64_t g0, int64_t g1, void *dst) {
    const int nb = k / BK_QK;
    const uint8_t *src = (const uint8_t *)w;
    uint8_t *out = (uint8_t *)dst;
    const int offset = wtype != 3 && bk_x8_uses_vnni();
    for (int64_t g = g0; g < g1; g++) {
        for (int b = 0; b < nb; b++) {
            if (wtype == 3) {
                uint8_t *blk = out + ((size_t)g * nb + b) * BK_X8_Q4_1_BLOCK;
                uint16_t *d = (uint16_t *)blk, *m = (uint16_t *)(blk + 16);
                for (int r = 0; r < 8; r++) {
                    const bk_block_q4_1 *x = (const bk_block_q4_1 *)(src + (size_t)(g * 8 + r) * row_bytes) + b;
                    d[r] = x->d;
                    m[r] = x->m;
                    for (int c = 0; c < 4; c++) memcpy(blk + 32 + 32 * c + 4 * r, x->qs + 4 * c, 4);
                }
            } else {
                uint8_t *blk = out + ((size_t)g * nb + b) * BK_X8_Q8_0_BLOCK;
                uint16_t *d = (uint16_t *)blk;
                for (int r = 0; r < 8; r++) {
                    const bk_block_q8_0 *x = (const bk_block_q8_0 *)(src + (size_t)(g * 8 + r) * row_bytes) + b;
                    d[r] = x->d;
                    for (int j = 0; j < 8; j++) memcpy(blk + 16 + 32 * j + 4 * r, x->qs + 4 * j, 4);
                }
                if (offset) /* the VNNI kernel's layout: x + 128 as an unsigned byte */
                    for (int i = 16; i < BK_X8_Q8_0_BLOCK; i++) blk[i] ^= 0x80;
            }
        }
    }
}

#include <stdlib.h>

/* ggml's final sum of the eight lanes, H(acc) = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)), on 8 rows at once */
static inline __attribute__((always_inline)) __m256 x8_lane_sum(const __m256 a[8]) {
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6])),
                         _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7])));
}

/* ---- AVX2 lanes */
#define SFX(name) name##_avx2
#define LANES_US(u, s) bk_lanes_avx2(u, s)
#include "rows8_body.h"
X8_DRIVER(x8_q4_1_avx2, x8_q4_1_cols_avx2, BK_X8_Q4_1_BLOCK, 1)
X8_DRIVER(x8_q8_0_avx2, x8_q8_0_cols_avx2, BK_X8_Q8_0_BLOCK, 1)
#undef SFX
#undef LANES_US
#undef X8_DRIVER

/* ---- AVX512-VNNI lanes, 32 registers: two columns share each unpacked weight register */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512vnni")
#define SFX(name) name##_vnni
#define LANES_US(u, s) bk_lanes_vnni(u, s)
#define X8_NO_Q8_0_SIGN_TRICK /* Q8_0 with VNNI: x8_q8_0_off_cols below */
#include "rows8_body.h"
#undef X8_NO_Q8_0_SIGN_TRICK
X8_DRIVER(x8_q4_1_vnni, x8_q4_1_cols_vnni, BK_X8_Q4_1_BLOCK, 2)

/* -128 * (sum of each 4 activation bytes), per column and block: the starts of x8_q8_0_off_cols */
static void q8_0_corr(int nc, int nb, const uint8_t *a, size_t a_col, int32_t *corr) {
    const __m256i ones = _mm256_set1_epi8(1);
    for (int c = 0; c < nc; c++)
        for (int b = 0; b < nb; b++) {
            const bk_block_q8_0 *y = (const bk_block_q8_0 *)(a + c * a_col) + b;
            const __m256i s4 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones,
                                                   _mm256_loadu_si256((const __m256i *)y->qs));
            _mm256_storeu_si256((__m256i *)(corr + ((size_t)c * nb + b) * 8),
                                _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(s4, 7)));
        }
}

/* Q8_0x8 with VNNI, on the offset layout (x + 128 unsigned, bk_x8_pack): vpdpbusd started from
 * -128 * (y0 + y1 + y2 + y3) gives sum x_i y_i, the same exact integer as the sign trick, without the four
 * VEX-only vpsignb per lane (which cannot reach registers 16..31). corr: [NC][nb][8] of those starts, or NULL:
 * made block by block here. */
static inline __attribute__((always_inline)) void x8_q8_0_off_cols(int NC, int nb, const uint8_t *g, const uint8_t *a,
                                                                  size_t a_col, const int32_t *corr, float *out,
                                                                  int64_t out_col) {
    __m256 acc[2][8];
    for (int c = 0; c < NC; c++)
        for (int j = 0; j < 8; j++) acc[c][j] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = g + (size_t)b * BK_X8_Q8_0_BLOCK;
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        __m256 dd[2];
        const int32_t *yq[2], *cr[2];
        int32_t tmp[2][8];
        for (int c = 0; c < NC; c++) {
            const bk_block_q8_0 *y = (const bk_block_q8_0 *)(a + c * a_col) + b;
            dd[c] = _mm256_mul_ps(d, _mm256_set1_ps(bk_h2f(y->d)));
            yq[c] = (const int32_t *)y->qs;
            if (corr) cr[c] = corr + ((size_t)c * nb + b) * 8;
            else { q8_0_corr(1, 1, (const uint8_t *)y, 0, tmp[c]); cr[c] = tmp[c]; }
        }
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m256i xu = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * j));
#pragma GCC unroll 2
            for (int c = 0; c < NC; c++) {
                const __m256i s = _mm256_dpbusd_epi32(_mm256_set1_epi32(cr[c][j]), xu, _mm256_set1_epi32(yq[c][j]));
                acc[c][j] = _mm256_fmadd_ps(dd[c], _mm256_cvtepi32_ps(s), acc[c][j]);
            }
        }
    }
    for (int c = 0; c < NC; c++) {
        const __m256 h = x8_lane_sum(acc[c]);
        _mm256_storeu_ps(out + c * out_col, h);
    }
}

static void x8_q8_0_vnni(int k, const uint8_t *x8, int64_t g0, int64_t g1, const uint8_t *a, size_t a_col, int n,
                         float *out, int64_t out_col) {
    const int nb = k / BK_QK;
    const size_t gbytes = (size_t)nb * BK_X8_Q8_0_BLOCK;
    enum { NB_MAX = 256 }; /* k <= 8192: the starts of two columns on the stack (16 KiB), else made in the kernel */
    int32_t corr_stack[2 * NB_MAX * 8];
    int32_t *corr = nb <= NB_MAX ? corr_stack : NULL;
    for (int64_t p0 = g0; p0 < g1; p0 += 8) {
        const int64_t p1 = g1 - p0 < 8 ? g1 : p0 + 8;
        for (int c = 0; c < n; c += 2) {
            const int nc = n - c >= 2 ? 2 : n - c;
            if (corr) q8_0_corr(nc, nb, a + c * a_col, a_col, corr);
            for (int64_t g = p0; g < p1; g++) {
                const uint8_t *gp = x8 + (size_t)g * gbytes;
                float *o = out + c * out_col + g * 8;
                if (corr && nc == 2) x8_q8_0_off_cols(2, nb, gp, a + c * a_col, a_col, corr, o, out_col);
                else if (corr) x8_q8_0_off_cols(1, nb, gp, a + c * a_col, a_col, corr, o, out_col);
                else if (nc == 2) x8_q8_0_off_cols(2, nb, gp, a + c * a_col, a_col, NULL, o, out_col);
                else x8_q8_0_off_cols(1, nb, gp, a + c * a_col, a_col, NULL, o, out_col);
            }
        }
    }
}
#undef SFX
#undef LANES_US
#pragma GCC pop_options

static int vnni = -1;

int bk_x8_uses_vnni(void) {
    if (vnni < 0) {
        const char *off = getenv("BANKML_NO_VNNI");
        __builtin_cpu_init();
        vnni = !(off && off[0] == '1') && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl")
               && __builtin_cpu_supports("avx512bw");
    }
    return vnni;
}

void bk_x8_matmul(int32_t wtype, const void *x8, int32_t k, int64_t g0, int64_t g1, const void *act, size_t act_col,
                  int n, float *out, int64_t out_col) {
    const int v = bk_x8_uses_vnni();
    if (wtype == 3) {
        if (v) x8_q4_1_vnni(k, (const uint8_t *)x8, g0, g1, (const uint8_t *)act, act_col, n, out, out_col);
        else x8_q4_1_avx2(k, (const uint8_t *)x8, g0, g1, (const uint8_t *)act, act_col, n, out, out_col);
    } else {
        if (v) x8_q8_0_vnni(k, (const uint8_t *)x8, g0, g1, (const uint8_t *)act, act_col, n, out, out_col);
        else x8_q8_0_avx2(k, (const uint8_t *)x8, g0, g1, (const uint8_t *)act, act_col, n, out, out_col);
    }
}
