/* Embedding pooling and normalisation (pool.h). */
#include "pool.h"

#include "floatdot.h"

#include <math.h>

void bk_pool_mean(int n, int n_embd, const float *embd, float *out, float *scratch) {
    float *col = scratch, *mean = scratch + n;
    const float d = 1.0f / (float)n;
    for (int t = 0; t < n; t++) mean[t] = d;
    for (int e = 0; e < n_embd; e++) {
        for (int t = 0; t < n; t++) col[t] = embd[(long)t * n_embd + e];
        out[e] = bk_dot_f32(n, col, mean);
    }
}

/* MUL_MAT(CONT(TRANSPOSE(embd)), inp_mean) with inp_mean ([ns][n]) at scratch + n*n_embd, filled by the caller */
static void mean_product(int n, int ns, int n_embd, const float *embd, float *out, float *scratch) {
    float *tr = scratch, *mean = scratch + (long)n * n_embd;  /* tr: the transposed rows; mean: [ns][n] */
    for (int e = 0; e < n_embd; e++)
        for (int t = 0; t < n; t++) tr[(long)e * n + t] = embd[(long)t * n_embd + e];
    if (bk_tinyblas_takes(n_embd, n, ns)) {
        bk_gemm_f32_tb(n, tr, n, 0, n_embd, mean, n, ns, out, n_embd);
        return;
    }
    for (int s = 0; s < ns; s++)
        for (int e = 0; e < n_embd; e++)
            out[(long)s * n_embd + e] = bk_dot_f32(n, tr + (long)e * n, mean + (long)s * n);
}

void bk_pool_mean_ubatch(int ns, int nst, int n_embd, const float *embd, float *out, float *scratch) {
    const int n = ns * nst;
    float *mean = scratch + (long)n * n_embd;
    const float d = 1.0f / (float)nst;
    for (int s = 0; s < ns; s++)
        for (int t = 0; t < n; t++) mean[(long)s * n + t] = t / nst == s ? d : 0.0f;
    mean_product(n, ns, n_embd, embd, out, scratch);
}

void bk_pool_mean_rows(int n, int ns, int n_embd, const float *embd, const int *col, float *out, float *scratch) {
    float *mean = scratch + (long)n * n_embd;
    for (int s = 0; s < ns; s++) {
        int count = 0;
        for (int t = 0; t < n; t++) count += col[t] == s;
        const float d = count > 0 ? 1.0f / (float)count : 0.0f;
        for (int t = 0; t < n; t++) mean[(long)s * n + t] = col[t] == s ? d : 0.0f;
    }
    mean_product(n, ns, n_embd, embd, out, scratch);
}

void bk_embd_normalize(const float *x, float *out, int n, int mode) {
    double sum = 0.0;
    switch (mode) {
    case -1:
        sum = 1.0;
        break;
    case 0:
        for (int i = 0; i < n; i++)
            if (sum < fabsf(x[i])) sum = fabsf(x[i]);
        sum /= 32760.0;
        break;
    case 2:
        for (int i = 0; i < n; i++) {
            const float sq = x[i] * x[i];
            sum += sq;
        }
        sum = sqrt(sum);
        break;
    default:
        for (int i = 0; i < n; i++) sum += pow((double)fabsf(x[i]), (double)mode);
        sum = pow(sum, 1.0 / mode);
        break;
    }
    const float norm = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (int i = 0; i < n; i++) out[i] = x[i] * norm;
}
