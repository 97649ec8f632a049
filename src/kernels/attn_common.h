/* Pieces shared by attention.c and attention_q8.c (private to the attention kernels). */
#ifndef BK_ATTN_COMMON_H
#define BK_ATTN_COMMON_H
#include <math.h>

/* The online-softmax factors of ggml's one-chunk loop for n scores s[j] in cell order, from the running max *M:
 * on a new maximum (s > M) the accumulator is scaled by ms = expf(M - s) and the cell weighs vs = 1; otherwise
 * ms = 1 and vs = expf(s - M) (libm expf). The expf calls do not depend on each other, only on the max. */
static inline void bk_attn_online_factors(const float *s, int n, float *M, float *ms, float *vs) {
    float m = *M;
    for (int j = 0; j < n; j++) {
        if (s[j] > m) {
            ms[j] = expf(m - s[j]);
            vs[j] = 1.0f;
            m = s[j];
        } else {
            ms[j] = 1.0f;
            vs[j] = expf(s[j] - m);
        }
    }
    *M = m;
}

#endif
