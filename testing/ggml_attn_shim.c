/* The oracle for the attention kernels: ggml b11192's own ops (FLASH_ATTN_EXT, SET_ROWS) run by the oracle
 * build's libggml-cpu on caller buffers. Built on demand by testing/ggml_ops.py; developer tool, never shipped.
 *
 * The tensors are laid out as llama.cpp lays them out (src/llama-kv-cache.cpp get_k/get_v, llama-graph.cpp
 * build_attn_mha): Q is [dk, n_head, n_tokens] permuted to [dk, n_tokens, n_head]; K and V are views of an
 * F16 (or Q8_0) cache of kv_size rows of n_head_kv*d values, [d, n_head_kv, n_kv] permuted to
 * [d, n_kv, n_head_kv]; the mask is F16 [n_kv, n_tokens]; the result is [dv, n_head, n_tokens].
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "ggml.h"
#include "ggml-cpu.h"

static struct ggml_context *new_ctx(size_t bytes) {
    struct ggml_init_params ip = {bytes + (size_t)64 * 1024 * 1024, NULL, false};
    return ggml_init(ip);
}

/* SET_ROWS: cache (kv_size rows of type kv_type, n values each) gets row t of x (float [n_tokens][n]) at
 * row idx[t]. The cache is read and written in place. */
int shim_set_rows(int n, int n_tokens, int kv_size, int kv_type, const float *x, const int64_t *idx, void *cache,
                  int nth) {
    enum ggml_type t = (enum ggml_type)kv_type;
    size_t need = (size_t)n * n_tokens * 4 + ggml_row_size(t, n) * kv_size + (size_t)n_tokens * 8;
    struct ggml_context *ctx = new_ctx(need);
    if (!ctx) return 1;
    struct ggml_tensor *c = ggml_new_tensor_2d(ctx, t, n, kv_size);
    memcpy(c->data, cache, ggml_nbytes(c));
    struct ggml_tensor *src = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n_tokens);
    memcpy(src->data, x, ggml_nbytes(src));
    struct ggml_tensor *ix = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n_tokens);
    memcpy(ix->data, idx, ggml_nbytes(ix));
    struct ggml_tensor *r = ggml_set_rows(ctx, c, src, ix);
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, r);
    enum ggml_status st = ggml_graph_compute_with_ctx(ctx, gf, nth);
    if (st == GGML_STATUS_SUCCESS) memcpy(cache, c->data, ggml_nbytes(c));
    ggml_free(ctx);
    return st == GGML_STATUS_SUCCESS ? 0 : 3;
}

/* A planned FLASH_ATTN_EXT on the caller's buffers (no copies), for benchmarks: build once, run many times. */
typedef struct {
    struct ggml_context *ctx;
    struct ggml_cgraph *gf;
    struct ggml_cplan plan;
    void *work;
} fa_plan_t;

fa_plan_t *shim_fa_plan(int n_tokens, int n_head, int n_head_kv, int dk, int dv, int n_kv, int kv_size, int kv_type,
                        float scale, float *q, void *kc, void *vc, uint16_t *mask, float *out, int nth) {
    struct ggml_init_params ip = {(size_t)16 * 1024 * 1024, NULL, true};
    fa_plan_t *p = calloc(1, sizeof(*p));
    p->ctx = ggml_init(ip);
    enum ggml_type t = (enum ggml_type)kv_type;
    struct ggml_tensor *qf = ggml_new_tensor_3d(p->ctx, GGML_TYPE_F32, dk, n_head, n_tokens);
    qf->data = q;
    struct ggml_tensor *kcache = ggml_new_tensor_2d(p->ctx, t, (int64_t)n_head_kv * dk, kv_size);
    struct ggml_tensor *vcache = ggml_new_tensor_2d(p->ctx, t, (int64_t)n_head_kv * dv, kv_size);
    kcache->data = kc;
    vcache->data = vc;
    struct ggml_tensor *k = ggml_view_3d(p->ctx, kcache, dk, n_head_kv, n_kv, ggml_row_size(t, dk), kcache->nb[1], 0);
    struct ggml_tensor *v = ggml_view_3d(p->ctx, vcache, dv, n_head_kv, n_kv, ggml_row_size(t, dv), vcache->nb[1], 0);
    struct ggml_tensor *m = NULL;
    if (mask) {
        m = ggml_new_tensor_2d(p->ctx, GGML_TYPE_F16, n_kv, n_tokens);
        m->data = mask;
    }
    struct ggml_tensor *fa = ggml_flash_attn_ext(p->ctx, ggml_permute(p->ctx, qf, 0, 2, 1, 3),
                                                 ggml_permute(p->ctx, k, 0, 2, 1, 3),
                                                 ggml_permute(p->ctx, v, 0, 2, 1, 3), m, scale, 0.0f, 0.0f);
    ggml_prec_set_acc(fa, GGML_PREC_F32);
    fa->data = out;
    p->gf = ggml_new_graph(p->ctx);
    ggml_build_forward_expand(p->gf, fa);
    p->plan = ggml_graph_plan(p->gf, nth, NULL);
    p->work = malloc(p->plan.work_size ? p->plan.work_size : 1);
    p->plan.work_data = p->work;
    return p;
}

int shim_fa_run(fa_plan_t *p) { return ggml_graph_compute(p->gf, &p->plan) == GGML_STATUS_SUCCESS ? 0 : 3; }

void shim_fa_free(fa_plan_t *p) {
    if (!p) return;
    free(p->work);
    ggml_free(p->ctx);
    free(p);
}

/* Flash attention, computed once. q: float [n_tokens][n_head][dk]; kc, vc: caches of kv_size rows (type kv_type,
 * 1 = F16, 8 = Q8_0); mask: F16 [n_tokens][n_kv] or NULL; out: float [n_tokens][n_head][dv]. Returns 0 on
 * success. */
int shim_flash_attn(int n_tokens, int n_head, int n_head_kv, int dk, int dv, int n_kv, int kv_size, int kv_type,
                    float scale, float *q, void *kc, void *vc, uint16_t *mask, float *out, int nth) {
    fa_plan_t *p = shim_fa_plan(n_tokens, n_head, n_head_kv, dk, dv, n_kv, kv_size, kv_type, scale, q, kc, vc, mask,
                                out, nth);
    if (!p) return 1;
    const int rc = shim_fa_run(p);
    shim_fa_free(p);
    return rc;
}

/* The Hadamard rotation as llama.cpp asks for it (llama_mul_mat_hadamard): MUL_MAT of an n x n matrix with
 * the hint GGML_HINT_SRC0_IS_HADAMARD, which the CPU backend computes as ggml_compute_forward_fwht (it reads
 * only the second operand). x: float [n_rows][n]; out: float [n_rows][n]. */
int shim_fwht(int n, int n_rows, const float *x, float *out, int nth) {
    struct ggml_context *ctx = new_ctx((size_t)n * n * 4 + (size_t)n * n_rows * 8);
    if (!ctx) return 1;
    struct ggml_tensor *rot = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n);
    float *h = (float *)rot->data;
    h[0] = 1.0f / sqrtf((float)n);
    for (int s = 1; s < n; s *= 2)
        for (int i = 0; i < s; i++)
            for (int j = 0; j < s; j++) {
                const float val = h[i * n + j];
                h[(i + s) * n + j] = val;
                h[i * n + j + s] = val;
                h[(i + s) * n + j + s] = -val;
            }
    struct ggml_tensor *src = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n_rows);
    memcpy(src->data, x, ggml_nbytes(src));
    struct ggml_tensor *r = ggml_mul_mat(ctx, rot, src);
    ggml_mul_mat_set_hint(r, GGML_HINT_SRC0_IS_HADAMARD);
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, r);
    enum ggml_status st = ggml_graph_compute_with_ctx(ctx, gf, nth);
    if (st == GGML_STATUS_SUCCESS) memcpy(out, r->data, ggml_nbytes(r));
    ggml_free(ctx);
    return st == GGML_STATUS_SUCCESS ? 0 : 3;
}
