/* RoPE NORMAL and NEOX, the K-cache shift; the float order is in rope.h. */
#define _GNU_SOURCE
#include "rope.h"

#include <math.h>

#include "attention.h"
#include "fp16.h"
#include "quants.h"

float bk_rope_theta_scale(float freq_base, int n_rot) { return powf(freq_base, -2.0f / n_rot); }

void bk_rope_cache(int32_t pos, int n_rot, float theta_scale, float *cache) {
    float theta = (float)pos;
    for (int i = 0; i < n_rot; i += 2) {
        float s, c;
        sincosf(theta, &s, &c);
        cache[i] = c;
        cache[i + 1] = s;
        theta *= theta_scale;
    }
}

void bk_rope_normal(float *x, int n_head, int64_t head_stride, int n_rot, const float *cache) {
    for (int h = 0; h < n_head; h++) {
        float *p = x + h * head_stride;
        for (int i = 0; i < n_rot; i += 2) {
            const float c = cache[i], s = cache[i + 1];
            const float x0 = p[i], x1 = p[i + 1];
            p[i] = fmaf(x0, c, -(x1 * s));
            p[i + 1] = fmaf(x0, s, x1 * c);
        }
    }
}

void bk_rope_neox(float *x, int n_head, int64_t head_stride, int n_rot, const float *cache) {
    const int half = n_rot / 2;
    for (int h = 0; h < n_head; h++) {
        float *p = x + h * head_stride;
        for (int i = 0; i < half; i++) {
            const float c = cache[2 * i], s = cache[2 * i + 1];
            const float x0 = p[i], x1 = p[i + half];
            p[i] = fmaf(x0, c, -(x1 * s));
            p[i + half] = fmaf(x0, s, x1 * c);
        }
    }
}

void bk_rope_shift_f16(uint16_t *k, uint32_t n_cells, int64_t cell_stride, int n_head_kv, int hd, int n_rot,
                       int neox, float theta_scale, const int32_t *shift, float *cache) {
    /* pair i of a head: values (a, a + off) with a = 2i, off = 1 (NORMAL) or a = i, off = n_rot/2 (NEOX) */
    const int off = neox ? n_rot / 2 : 1;
    for (uint32_t i = 0; i < n_cells; i++) {
        bk_rope_cache(shift[i], n_rot, theta_scale, cache);
        for (int h = 0; h < n_head_kv; h++) {
            uint16_t *p = k + (int64_t)i * cell_stride + (int64_t)h * hd;
            for (int j = 0; j < n_rot; j += 2) {
                const int a = neox ? j / 2 : j;
                const float c = cache[j], s = cache[j + 1];
                const float x0 = bk_h2f(p[a]), x1 = bk_h2f(p[a + off]);
                p[a] = bk_f2h(fmaf(x0, c, -(x1 * s)));
                p[a + off] = bk_f2h(fmaf(x0, s, x1 * c));
            }
        }
    }
}

int bk_rope_shift_q8_0(uint8_t *k, uint32_t n_cells, int64_t cell_bytes, int n_head_kv, int hd, int n_rot,
                       int neox, int rot_k, float theta_scale, const int32_t *shift, float *row, float *cache) {
    if (n_rot != hd) return -1;
    const int64_t n = (int64_t)n_head_kv * hd;
    for (uint32_t i = 0; i < n_cells; i++) {
        uint8_t *q = k + (int64_t)i * cell_bytes;
        bk_dequant_row_q8_0(q, row, n);
        if (rot_k) bk_hadamard_rows(row, n / rot_k, rot_k, rot_k, 0, 1);
        bk_rope_cache(shift[i], n_rot, theta_scale, cache);
        if (neox)
            bk_rope_neox(row, n_head_kv, hd, n_rot, cache);
        else
            bk_rope_normal(row, n_head_kv, hd, n_rot, cache);
        if (rot_k) bk_hadamard_rows(row, n / rot_k, rot_k, rot_k, 0, 1);
        bk_quant_row_q8_0(row, q, n);
    }
    return 0;
}
