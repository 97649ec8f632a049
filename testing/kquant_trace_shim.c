/* Watch llama.cpp b11192 multiply: a libllama context (made as llama-server makes it for -t T -c C -np 1) with
 * an eval callback that copies, for chosen layers (and the output head), the activations and result of every
 * MUL_MAT node, the weight's name, type and buffer (CPU_REPACK when the loader repacked it), and the inputs
 * and result of every GEGLU node. Developer tool for testing/record_kquants.py (a real-model check of the
 * kernels); built on demand by testing/kquant_trace.py, never part of bankml.
 *
 * Layouts of the copies: x float [n][k]; out float [n][m]; GEGLU: x, g, out float [rows][n]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "llama.h"

typedef struct {
    int kind;          /* 0 = MUL_MAT, 1 = GEGLU */
    int layer;         /* blk.N of the weight (MUL_MAT) or the counted layer (GEGLU); -1 = output head */
    int graph;         /* ubatch counter */
    int wtype, k, m, n;
    char name[64];     /* weight tensor name */
    char buffer[32];   /* the weight's buffer name */
    float *x, *g, *out;
} rec_t;

typedef struct {
    struct llama_model *model;
    struct llama_context *ctx;
    struct llama_batch batch;
    int n_batch, n_layer, graph, glu_in_graph;
    uint64_t layer_mask; /* bit i: layer i; bit 63: the output head */
    rec_t *recs;
    int n_recs, cap_recs;
} trace_t;

static void quiet(enum ggml_log_level level, const char *text, void *ud) { (void)level; (void)text; (void)ud; }

static rec_t *push(trace_t *s) {
    if (s->n_recs == s->cap_recs) {
        s->cap_recs = s->cap_recs ? 2 * s->cap_recs : 64;
        s->recs = realloc(s->recs, (size_t)s->cap_recs * sizeof(rec_t));
    }
    rec_t *r = &s->recs[s->n_recs++];
    memset(r, 0, sizeof(*r));
    r->graph = s->graph;
    return r;
}

static int weight_layer(const struct ggml_tensor *w) {
    int il;
    if (sscanf(w->name, "blk.%d.", &il) == 1) return il;
    return -1;
}

static int wanted(trace_t *s, int il) { return il < 0 ? (int)((s->layer_mask >> 63) & 1) : il < 63 && ((s->layer_mask >> il) & 1); }

static float *copy_rows(const struct ggml_tensor *t) {
    const int64_t n0 = t->ne[0], n1 = t->ne[1] * t->ne[2] * t->ne[3];
    float *d = malloc((size_t)n0 * n1 * 4);
    for (int64_t i3 = 0, r = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++, r++)
                memcpy(d + r * n0, (const char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3], (size_t)n0 * 4);
    return d;
}

static bool on_eval(struct ggml_tensor *t, bool ask, void *ud) {
    trace_t *s = ud;
    const int is_mm = t->op == GGML_OP_MUL_MAT && t->src[0]->type != GGML_TYPE_F32 && t->src[0]->type != GGML_TYPE_F16 &&
                      t->src[1]->type == GGML_TYPE_F32;
    const int is_glu = t->op == GGML_OP_GLU && ggml_get_glu_op(t) == GGML_GLU_OP_GEGLU;
    if (ask) return is_mm || is_glu;
    if (is_mm) {
        const struct ggml_tensor *w = t->src[0];
        const int il = weight_layer(w);
        if (wanted(s, il)) {
            rec_t *r = push(s);
            r->kind = 0;
            r->layer = il;
            r->wtype = (int)w->type;
            r->k = (int)w->ne[0];
            r->m = (int)w->ne[1];
            r->n = (int)(t->src[1]->ne[1] * t->src[1]->ne[2] * t->src[1]->ne[3]);
            snprintf(r->name, sizeof(r->name), "%s", w->name);
            snprintf(r->buffer, sizeof(r->buffer), "%s", w->buffer ? ggml_backend_buffer_name(w->buffer) : "?");
            r->x = copy_rows(t->src[1]);
            r->out = copy_rows(t);
        }
        if (il < 0) s->graph++, s->glu_in_graph = 0; /* the output head ends the ubatch's graph */
    } else if (is_glu) {
        if (wanted(s, s->glu_in_graph)) {
            rec_t *r = push(s);
            r->kind = 1;
            r->layer = s->glu_in_graph;
            r->k = (int)t->ne[0];
            r->n = (int)(t->ne[1] * t->ne[2] * t->ne[3]);
            r->x = copy_rows(t->src[0]);
            r->g = copy_rows(t->src[1]);
            r->out = copy_rows(t);
        }
        s->glu_in_graph++;
    }
    return true;
}

trace_t *trace_open(const char *path, int n_ctx, int n_batch, int n_ubatch, int n_threads, uint64_t layer_mask,
                    int quiet_log) {
    llama_log_set(quiet_log ? quiet : NULL, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) return NULL;
    trace_t *s = calloc(1, sizeof(*s));
    s->model = model;
    s->layer_mask = layer_mask;
    s->n_layer = llama_model_n_layer(model);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_ubatch = n_ubatch;
    cp.n_seq_max = 1;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    cp.kv_unified = false;
    cp.swa_full = false; /* as llama-server (common_params) */
    cp.no_perf = true;
    cp.cb_eval = on_eval;
    cp.cb_eval_user_data = s;
    s->ctx = llama_init_from_model(model, cp);
    if (!s->ctx) {
        llama_model_free(model);
        free(s);
        return NULL;
    }
    s->n_batch = n_batch;
    s->batch = llama_batch_init(n_batch, 0, 1);
    return s;
}

static void free_recs(trace_t *s) {
    for (int i = 0; i < s->n_recs; i++) {
        free(s->recs[i].x);
        free(s->recs[i].g);
        free(s->recs[i].out);
    }
    s->n_recs = 0;
}

void trace_close(trace_t *s) {
    if (!s) return;
    free_recs(s);
    free(s->recs);
    llama_batch_free(s->batch);
    llama_free(s->ctx);
    llama_model_free(s->model);
    free(s);
}

void trace_reset(trace_t *s) { free_recs(s); }

/* One llama_decode of tokens at positions pos.. (logits for the last one only, as the server asks). */
int trace_decode(trace_t *s, const int *tokens, int n, int pos) {
    if (n > s->n_batch) return -100;
    s->batch.n_tokens = n;
    for (int i = 0; i < n; i++) {
        s->batch.token[i] = tokens[i];
        s->batch.pos[i] = pos + i;
        s->batch.n_seq_id[i] = 1;
        s->batch.seq_id[i][0] = 0;
        s->batch.logits[i] = i == n - 1;
    }
    return llama_decode(s->ctx, s->batch);
}

int trace_n_recs(trace_t *s) { return s->n_recs; }
rec_t *trace_rec(trace_t *s, int i) { return &s->recs[i]; }
