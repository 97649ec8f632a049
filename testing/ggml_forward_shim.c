/* The oracle for the forward pass's kernels: single ggml b11192 ops (MUL_MAT, RMS_NORM + MUL, ROPE, GET_ROWS)
 * computed by the oracle build's libggml-cpu on caller buffers. Built on demand by testing/ggml_forward_ops.py;
 * developer tool, never shipped. Layouts are ggml's: a weight of m rows of k elements, activations of n columns
 * of k floats, results of n columns of m floats. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-cpu.h"

static struct ggml_context *new_ctx(size_t bytes) {
    struct ggml_init_params ip = {bytes + (size_t)64 * 1024 * 1024, NULL, false};
    return ggml_init(ip);
}

static int run(struct ggml_context *ctx, struct ggml_tensor *r, int nth) {
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, r);
    return ggml_graph_compute_with_ctx(ctx, gf, nth) == GGML_STATUS_SUCCESS ? 0 : 3;
}

int shim_mul_mat(int wtype, int k, int m, int n, const void *w, const float *x, float *out, int nth) {
    enum ggml_type t = (enum ggml_type)wtype;
    struct ggml_context *ctx = new_ctx(ggml_row_size(t, k) * m + (size_t)k * n * 4 + (size_t)m * n * 4);
    if (!ctx) return 1;
    struct ggml_tensor *W = ggml_new_tensor_2d(ctx, t, k, m);
    memcpy(W->data, w, ggml_nbytes(W));
    struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
    memcpy(X->data, x, ggml_nbytes(X));
    struct ggml_tensor *r = ggml_mul_mat(ctx, W, X);
    int st = run(ctx, r, nth);
    if (!st) memcpy(out, r->data, ggml_nbytes(r));
    ggml_free(ctx);
    return st;
}

int shim_rms_norm_mul(int k, int rows, const float *x, const float *w, float eps, float *out, int nth) {
    struct ggml_context *ctx = new_ctx((size_t)k * rows * 8 + (size_t)k * 4);
    if (!ctx) return 1;
    struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, rows);
    memcpy(X->data, x, ggml_nbytes(X));
    struct ggml_tensor *Wt = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, k);
    memcpy(Wt->data, w, ggml_nbytes(Wt));
    struct ggml_tensor *r = ggml_mul(ctx, ggml_rms_norm(ctx, X, eps), Wt);
    int st = run(ctx, r, nth);
    if (!st) memcpy(out, r->data, ggml_nbytes(r));
    ggml_free(ctx);
    return st;
}

/* ROPE NORMAL (mode 0) of x [head_dim, n_head, n_tokens] at pos[n_tokens], as llama's graph calls ggml_rope_ext */
int shim_rope(int head_dim, int n_head, int n_tokens, int n_rot, float freq_base, const float *x, const int32_t *pos,
              float *out, int nth) {
    struct ggml_context *ctx = new_ctx((size_t)head_dim * n_head * n_tokens * 8 + (size_t)n_tokens * 4);
    if (!ctx) return 1;
    struct ggml_tensor *X = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, head_dim, n_head, n_tokens);
    memcpy(X->data, x, ggml_nbytes(X));
    struct ggml_tensor *P = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    memcpy(P->data, pos, ggml_nbytes(P));
    struct ggml_tensor *r = ggml_rope_ext(ctx, X, P, NULL, n_rot, 0, 8192, freq_base, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    int st = run(ctx, r, nth);
    if (!st) memcpy(out, r->data, ggml_nbytes(r));
    ggml_free(ctx);
    return st;
}

/* GET_ROWS of rows ids[n] from a table of n_rows rows of k elements of type t */
int shim_get_rows(int wtype, int k, int n_rows, const void *table, int n, const int32_t *ids, float *out, int nth) {
    enum ggml_type t = (enum ggml_type)wtype;
    struct ggml_context *ctx = new_ctx(ggml_row_size(t, k) * n_rows + (size_t)n * 4 + (size_t)k * n * 4);
    if (!ctx) return 1;
    struct ggml_tensor *T = ggml_new_tensor_2d(ctx, t, k, n_rows);
    memcpy(T->data, table, ggml_nbytes(T));
    struct ggml_tensor *I = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    memcpy(I->data, ids, ggml_nbytes(I));
    struct ggml_tensor *r = ggml_get_rows(ctx, T, I);
    int st = run(ctx, r, nth);
    if (!st) memcpy(out, r->data, ggml_nbytes(r));
    ggml_free(ctx);
    return st;
}
