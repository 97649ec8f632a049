/* The oracle for the weight kernels: ggml b11192's own MUL_MAT (and GELU / GEGLU) run by the oracle build's
 * CPU backend on caller buffers. Built on demand by testing/ggml_kquant_ops.py; developer tool, never shipped.
 *
 * A MUL_MAT node is computed as llama-server computes it: through ggml_backend_graph_compute on a CPU backend
 * with n_threads set, the weight tensor allocated in the buffer type llama.cpp's loader would choose for it:
 * the CPU_REPACK extra buffer type (ggml_backend_dev_get_extra_bufts of the CPU device) when `repack` is set,
 * in which case ggml_backend_tensor_set repacks it and the node runs repack.cpp's forward_mul_mat; the plain
 * CPU buffer type otherwise (llamafile sgemm or vec_dot per output, as ggml-cpu.c decides).
 * Layouts: w: m rows of k values of type wtype (GGUF layout); x float [n][k]; out float [n][m].
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

typedef struct {
    ggml_backend_t be;
    struct ggml_context *ctx_w, *ctx_a;
    ggml_backend_buffer_t buf_w, buf_a;
    struct ggml_cgraph *gf;
    struct ggml_tensor *w, *x, *y;
} mm_plan_t;

static ggml_backend_buffer_type_t repack_buft(void) {
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
    ggml_backend_dev_get_extra_bufts_t fn =
        (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    if (!fn) return NULL;
    for (ggml_backend_buffer_type_t *b = fn(dev); b && *b; b++)
        if (strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) return *b;
    return NULL;
}

void kq_mm_free(mm_plan_t *p) {
    if (!p) return;
    if (p->buf_a) ggml_backend_buffer_free(p->buf_a);
    if (p->buf_w) ggml_backend_buffer_free(p->buf_w);
    if (p->ctx_a) ggml_free(p->ctx_a);
    if (p->ctx_w) ggml_free(p->ctx_w);
    if (p->be) ggml_backend_free(p->be);
    free(p);
}

/* Build the node once (the weight copied, and repacked if asked); run it with kq_mm_run. NULL on failure. */
static void quiet(enum ggml_log_level level, const char *text, void *ud) { (void)level; (void)text; (void)ud; }

mm_plan_t *kq_mm_plan(int wtype, int k, int m, int n, const void *w, int repack, int nth) {
    ggml_log_set(quiet, NULL); /* repack.cpp logs every repacked tensor */
    mm_plan_t *p = calloc(1, sizeof(*p));
    p->be = ggml_backend_cpu_init();
    if (!p->be) goto fail;
    ggml_backend_cpu_set_n_threads(p->be, nth);
    struct ggml_init_params ipw = {ggml_tensor_overhead() * 2, NULL, true};
    p->ctx_w = ggml_init(ipw);
    p->w = ggml_new_tensor_2d(p->ctx_w, (enum ggml_type)wtype, k, m);
    ggml_backend_buffer_type_t bt = repack ? repack_buft() : ggml_backend_cpu_buffer_type();
    if (!bt) goto fail;
    p->buf_w = ggml_backend_alloc_ctx_tensors_from_buft(p->ctx_w, bt);
    if (!p->buf_w) goto fail;
    ggml_backend_tensor_set(p->w, w, 0, ggml_nbytes(p->w));
    struct ggml_init_params ipa = {ggml_tensor_overhead() * 4 + ggml_graph_overhead(), NULL, true};
    p->ctx_a = ggml_init(ipa);
    p->x = ggml_new_tensor_2d(p->ctx_a, GGML_TYPE_F32, k, n);
    p->y = ggml_mul_mat(p->ctx_a, p->w, p->x);
    p->buf_a = ggml_backend_alloc_ctx_tensors_from_buft(p->ctx_a, ggml_backend_cpu_buffer_type());
    if (!p->buf_a) goto fail;
    p->gf = ggml_new_graph(p->ctx_a);
    ggml_build_forward_expand(p->gf, p->y);
    return p;
fail:
    kq_mm_free(p);
    return NULL;
}

/* The node on activations x; out gets the result. Returns 0 on success. */
int kq_mm_run(mm_plan_t *p, const float *x, float *out) {
    if (x) ggml_backend_tensor_set(p->x, x, 0, ggml_nbytes(p->x));
    if (ggml_backend_graph_compute(p->be, p->gf) != GGML_STATUS_SUCCESS) return 3;
    if (out) ggml_backend_tensor_get(p->y, out, 0, ggml_nbytes(p->y));
    return 0;
}

/* Raw access for benchmarks: the activation and result buffers (host memory). */
float *kq_mm_x(mm_plan_t *p) { return (float *)p->x->data; }
float *kq_mm_y(mm_plan_t *p) { return (float *)p->y->data; }

/* The weight buffer's type name ("CPU_REPACK" or "CPU") and its bytes as the kernels read them (the repacked
 * layout in a CPU_REPACK buffer: ggml has no get_tensor there, so they are read from tensor->data). */
const char *kq_mm_weight_buffer(mm_plan_t *p) { return ggml_backend_buffer_name(p->buf_w); }
size_t kq_mm_weight_bytes(mm_plan_t *p, void *dst) {
    if (dst) memcpy(dst, p->w->data, ggml_nbytes(p->w));
    return ggml_nbytes(p->w);
}

int kq_mul_mat(int wtype, int k, int m, int n, const void *w, const float *x, float *out, int repack, int nth) {
    mm_plan_t *p = kq_mm_plan(wtype, k, m, n, w, repack, nth);
    if (!p) return 1;
    const int rc = kq_mm_run(p, x, out);
    kq_mm_free(p);
    return rc;
}

/* GGML_OP_GLU GEGLU (ggml_geglu_split(x, g)) or, with g NULL, GGML_OP_GELU, over rows of n floats. */
int kq_gelu(int n, int rows, const float *x, const float *g, float *out, int nth) {
    struct ggml_init_params ip = {(size_t)n * rows * 4 * 3 + 16 * 1024 * 1024, NULL, false};
    struct ggml_context *ctx = ggml_init(ip);
    if (!ctx) return 1;
    struct ggml_tensor *a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, rows);
    memcpy(a->data, x, ggml_nbytes(a));
    struct ggml_tensor *r;
    if (g) {
        struct ggml_tensor *b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, rows);
        memcpy(b->data, g, ggml_nbytes(b));
        r = ggml_geglu_split(ctx, a, b);
    } else {
        r = ggml_gelu(ctx, a);
    }
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, r);
    const enum ggml_status st = ggml_graph_compute_with_ctx(ctx, gf, nth);
    if (st == GGML_STATUS_SUCCESS) memcpy(out, r->data, ggml_nbytes(r));
    ggml_free(ctx);
    return st == GGML_STATUS_SUCCESS ? 0 : 3;
}

/* A planned GEGLU (x, g, out: float [rows][n], the caller's buffers) for benchmarks. */
typedef struct {
    struct ggml_context *ctx;
    struct ggml_cgraph *gf;
    struct ggml_cplan plan;
    void *work;
} glu_plan_t;

glu_plan_t *kq_glu_plan(int n, int rows, float *x, float *g, float *out, int nth) {
    struct ggml_init_params ip = {ggml_tensor_overhead() * 4 + ggml_graph_overhead(), NULL, true};
    glu_plan_t *p = calloc(1, sizeof(*p));
    p->ctx = ggml_init(ip);
    struct ggml_tensor *a = ggml_new_tensor_2d(p->ctx, GGML_TYPE_F32, n, rows);
    struct ggml_tensor *b = ggml_new_tensor_2d(p->ctx, GGML_TYPE_F32, n, rows);
    a->data = x;
    b->data = g;
    struct ggml_tensor *r = ggml_geglu_split(p->ctx, a, b);
    r->data = out;
    p->gf = ggml_new_graph(p->ctx);
    ggml_build_forward_expand(p->gf, r);
    p->plan = ggml_graph_plan(p->gf, nth, NULL);
    p->work = malloc(p->plan.work_size ? p->plan.work_size : 1);
    p->plan.work_data = p->work;
    return p;
}

int kq_glu_run(glu_plan_t *p) { return ggml_graph_compute(p->gf, &p->plan) == GGML_STATUS_SUCCESS ? 0 : 3; }

void kq_glu_free(glu_plan_t *p) {
    if (!p) return;
    free(p->work);
    ggml_free(p->ctx);
    free(p);
}
