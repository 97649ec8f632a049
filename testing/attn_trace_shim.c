/* Watch llama.cpp b11192 attend: a libllama context (made as llama-server makes it for -t T -c C -np 1) with an
 * eval callback that copies, for chosen layers, the inputs and output of every FLASH_ATTN_EXT node (Q, the K
 * and V cache views it reads, the F16 mask, the scale) and the cell indices of every SET_ROWS into the cache.
 * Developer tool for testing/record_attention.py (KV-cache rules and a real-model check of the kernels); built
 * on demand by testing/attn_trace.py, never part of bankml.
 *
 * Layouts of the copies: q float [n_tokens][n_head][dk]; k, v F16 [n_kv][n_head_kv*d]; mask F16 [n_tokens][n_kv];
 * out float [n_tokens][n_head][dv]; idxs int64 [n_tokens]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "llama.h"

typedef struct {
    int kind;     /* 0 = flash attention, 1 = set_rows, 2 = Hadamard rotation (MUL_MAT with the hint) */
    int layer;    /* FA: index of the FA node in its graph; set_rows: index of the node in its graph */
    int graph;    /* graph (ubatch) counter */
    int n_tokens, n_head, n_head_kv, dk, dv, n_kv;
    float scale;
    float *q, *out;
    uint16_t *k, *v, *mask;
    int64_t *idxs;
    int n_idxs;
    int64_t cache_rows; /* set_rows: rows of the destination */
    int kv_type;        /* FA: ggml type of K and V */
    int64_t k_row, v_row; /* FA: bytes of one head's K / V row */
    int rot_n, rot_rows;  /* rotation: size and rows; q = input, out = output */
} rec_t;

typedef struct {
    struct llama_model *model;
    struct llama_context *ctx;
    struct llama_batch batch;
    int n_batch;
    uint64_t layer_mask; /* FA layers to copy (bit i = layer i; bit 63 = every layer >= 63) */
    int graph, fa_in_graph, sr_in_graph, n_layer;
    struct ggml_tensor *last_node;
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

static int want_layer(trace_t *s, int il) { return il >= 63 ? (int)((s->layer_mask >> 63) & 1) : (int)((s->layer_mask >> il) & 1); }

static void copy_fa(trace_t *s, struct ggml_tensor *t) {
    const struct ggml_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    rec_t *r = push(s);
    r->kind = 0;
    r->layer = s->fa_in_graph;
    r->dk = (int)q->ne[0];
    r->n_tokens = (int)q->ne[1];
    r->n_head = (int)q->ne[2];
    r->n_kv = (int)k->ne[1];
    r->n_head_kv = (int)k->ne[2];
    r->dv = (int)v->ne[0];
    r->kv_type = (int)k->type;
    r->k_row = (int64_t)ggml_row_size(k->type, r->dk);
    r->v_row = (int64_t)ggml_row_size(v->type, r->dv);
    memcpy(&r->scale, t->op_params, sizeof(float));
    r->q = malloc((size_t)r->n_tokens * r->n_head * r->dk * 4);
    for (int i = 0; i < r->n_tokens; i++)
        for (int h = 0; h < r->n_head; h++)
            memcpy(r->q + ((size_t)i * r->n_head + h) * r->dk, (char *)q->data + i * q->nb[1] + h * q->nb[2],
                   (size_t)r->dk * 4);
    r->k = malloc((size_t)r->n_kv * r->n_head_kv * r->k_row);
    r->v = malloc((size_t)r->n_kv * r->n_head_kv * r->v_row);
    for (int c = 0; c < r->n_kv; c++)
        for (int h = 0; h < r->n_head_kv; h++) {
            memcpy((char *)r->k + ((size_t)c * r->n_head_kv + h) * r->k_row,
                   (char *)k->data + c * k->nb[1] + h * k->nb[2], (size_t)r->k_row);
            memcpy((char *)r->v + ((size_t)c * r->n_head_kv + h) * r->v_row,
                   (char *)v->data + c * v->nb[1] + h * v->nb[2], (size_t)r->v_row);
        }
    if (m) {
        r->mask = malloc((size_t)r->n_tokens * r->n_kv * 2);
        for (int i = 0; i < r->n_tokens; i++)
            memcpy(r->mask + (size_t)i * r->n_kv, (char *)m->data + i * m->nb[1], (size_t)r->n_kv * 2);
    }
    r->out = malloc((size_t)r->n_tokens * r->n_head * r->dv * 4);
    for (int i = 0; i < r->n_tokens; i++)
        for (int h = 0; h < r->n_head; h++)
            memcpy(r->out + ((size_t)i * r->n_head + h) * r->dv, (char *)t->data + h * t->nb[1] + i * t->nb[2],
                   (size_t)r->dv * 4);
}

static void copy_set_rows(trace_t *s, struct ggml_tensor *t) {
    const struct ggml_tensor *ix = t->src[1];
    rec_t *r = push(s);
    r->kind = 1;
    r->layer = s->sr_in_graph;
    r->n_idxs = (int)ix->ne[0];
    r->cache_rows = t->ne[1];
    r->idxs = malloc((size_t)r->n_idxs * 8);
    for (int i = 0; i < r->n_idxs; i++) {
        if (ix->type == GGML_TYPE_I64) r->idxs[i] = *(int64_t *)((char *)ix->data + i * ix->nb[0]);
        else r->idxs[i] = *(int32_t *)((char *)ix->data + i * ix->nb[0]);
    }
}

static int is_rotation(const struct ggml_tensor *t) {
    return t->op == GGML_OP_MUL_MAT && t->op_params[1] == GGML_HINT_SRC0_IS_HADAMARD;
}

static void copy_rotation(trace_t *s, struct ggml_tensor *t) {
    const struct ggml_tensor *x = t->src[1];
    rec_t *r = push(s);
    r->kind = 2;
    r->layer = s->fa_in_graph;
    r->rot_n = (int)x->ne[0];
    r->rot_rows = (int)(ggml_nelements(x) / x->ne[0]);
    r->q = malloc(ggml_nbytes(x));
    r->out = malloc(ggml_nbytes(t));
    memcpy(r->q, x->data, ggml_nbytes(x));   /* both contiguous: the graph reshapes them to [n, rows] */
    memcpy(r->out, t->data, ggml_nbytes(t));
}

static bool on_eval(struct ggml_tensor *t, bool ask, void *ud) {
    trace_t *s = ud;
    if (ask) return t->op == GGML_OP_FLASH_ATTN_EXT || t->op == GGML_OP_SET_ROWS || is_rotation(t);
    if (is_rotation(t)) {
        if (want_layer(s, s->fa_in_graph)) copy_rotation(s, t);
        return true;
    }
    if (t->op == GGML_OP_FLASH_ATTN_EXT) {
        if (want_layer(s, s->fa_in_graph)) copy_fa(s, t);
        /* the last layer's FA ends the ubatch's graph */
        if (++s->fa_in_graph == s->n_layer) {
            s->graph++;
            s->fa_in_graph = 0;
            s->sr_in_graph = 0;
        }
    } else if (t->op == GGML_OP_SET_ROWS) {
        copy_set_rows(s, t);
        s->sr_in_graph++;
    }
    return true;
}

trace_t *trace_open(const char *path, int n_ctx, int n_batch, int n_ubatch, int n_threads, int type_k, int type_v,
                    uint64_t layer_mask, int quiet_log) {
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
    cp.type_k = (enum ggml_type)type_k;
    cp.type_v = (enum ggml_type)type_v;
    cp.kv_unified = false;
    /* llama_context_default_params() says swa_full = true; llama-server (common_params) says false: a
     * sliding-window cache of GGML_PAD(n_swa + n_ubatch, 256) cells for SWA models such as Gemma 3 */
    cp.swa_full = false;
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
        rec_t *r = &s->recs[i];
        free(r->q); free(r->out); free(r->k); free(r->v); free(r->mask); free(r->idxs);
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

/* One llama_decode of tokens at positions pos.. (logits for the last one). Records accumulate; the graph
 * (ubatch) counter advances after each graph's last FA node. */
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

int trace_seq_rm(trace_t *s, int p0, int p1) { return llama_memory_seq_rm(llama_get_memory(s->ctx), 0, p0, p1); }
void trace_clear(trace_t *s) { llama_memory_clear(llama_get_memory(s->ctx), true); }
int trace_n_layer(trace_t *s) { return llama_model_n_layer(s->model); }
int trace_n_recs(trace_t *s) { return s->n_recs; }
rec_t *trace_rec(trace_t *s, int i) { return &s->recs[i]; }
