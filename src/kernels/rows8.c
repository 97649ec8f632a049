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
            }
        }
    }
}

#include <stdlib.h>

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
#include "rows8_body.h"
X8_DRIVER(x8_q4_1_vnni, x8_q4_1_cols_vnni, BK_X8_Q4_1_BLOCK, 2)
X8_DRIVER(x8_q8_0_vnni, x8_q8_0_cols_vnni, BK_X8_Q8_0_BLOCK, 2)
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
