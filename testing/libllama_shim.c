/* A thin C layer over the oracle's libllama (llama.cpp b11192) so that Python can drive it through ctypes
 * without mirroring its parameter structs. Developer tool: built on demand by testing/libllama.py into the
 * oracle's cache directory; never part of bankml.
 *
 * The context is made as llama-server makes it for `-t T -c C -np 1` (common_context_params_to_llama):
 * n_batch = min(2048, n_ctx), n_ubatch = 512, one sequence, flash attention AUTO, F16 (or given) KV cache. */
#include <stdlib.h>
#include <string.h>
#include "llama.h"
#include "ggml-cpu.h"

typedef struct {
    struct llama_model *model;
    struct llama_context *ctx;
    struct llama_batch batch;
    int n_batch;
    struct ggml_threadpool *tp;
} shim_t;

static void quiet(enum ggml_log_level level, const char *text, void *ud) { (void)level; (void)text; (void)ud; }

void shim_quiet(int q) { llama_log_set(q ? quiet : NULL, NULL); }

shim_t *shim_open(const char *path, int n_ctx, int n_batch, int n_ubatch, int n_threads, int type_k, int type_v,
                  int vocab_only) {
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = vocab_only != 0;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) return NULL;
    shim_t *s = calloc(1, sizeof(*s));
    s->model = model;
    if (vocab_only) return s;
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
    cp.swa_full = false;  /* llama-server: common_params.swa_full defaults to false */
    cp.no_perf = true;
    s->ctx = llama_init_from_model(model, cp);
    if (!s->ctx) { llama_model_free(model); free(s); return NULL; }
    s->n_batch = n_batch;
    s->batch = llama_batch_init(n_batch, 0, 1);
    return s;
}

/* Compute with an explicit threadpool of n_threads threads polling at `poll` (0..100; llama-server's default is 50).
 * The thread count decides the bits (split-KV chunks); the polling only how long idle threads spin, which on a
 * loaded machine is the difference between seconds and minutes. */
int shim_threadpool(shim_t *s, int n_threads, int poll) {
    struct ggml_threadpool_params p = ggml_threadpool_params_default(n_threads);
    p.poll = (uint32_t)poll;
    s->tp = ggml_threadpool_new(&p);
    if (!s->tp) return -1;
    llama_attach_threadpool(s->ctx, s->tp, s->tp);
    return 0;
}

void shim_close(shim_t *s) {
    if (!s) return;
    if (s->ctx) { llama_batch_free(s->batch); llama_free(s->ctx); }
    if (s->tp) ggml_threadpool_free(s->tp);
    llama_model_free(s->model);
    free(s);
}

int shim_n_vocab(shim_t *s) { return llama_vocab_n_tokens(llama_model_get_vocab(s->model)); }
int shim_n_ctx(shim_t *s) { return (int)llama_n_ctx(s->ctx); }
const struct llama_vocab *shim_vocab(shim_t *s) { return llama_model_get_vocab(s->model); }
struct llama_model *shim_model(shim_t *s) { return s->model; }
struct llama_context *shim_ctx(shim_t *s) { return s->ctx; }

/* One llama_decode call with tokens [0, n) at positions pos..pos+n-1 of sequence 0. `outputs` (length n,
 * or NULL for "last token only") marks the rows whose logits are wanted. Returns llama_decode's code. */
int shim_decode(shim_t *s, const int *tokens, int n, int pos, const signed char *outputs) {
    if (n > s->n_batch) return -100;
    s->batch.n_tokens = n;
    for (int i = 0; i < n; i++) {
        s->batch.token[i] = tokens[i];
        s->batch.pos[i] = pos + i;
        s->batch.n_seq_id[i] = 1;
        s->batch.seq_id[i][0] = 0;
        s->batch.logits[i] = outputs ? outputs[i] : (i == n - 1);
    }
    return llama_decode(s->ctx, s->batch);
}

/* logits of the i-th token of the last batch (negative i counts from the end) */
float *shim_logits(shim_t *s, int i) { return llama_get_logits_ith(s->ctx, i); }

int shim_seq_rm(shim_t *s, int p0) { return llama_memory_seq_rm(llama_get_memory(s->ctx), 0, p0, -1); }
void shim_clear(shim_t *s) { llama_memory_clear(llama_get_memory(s->ctx), true); }
int shim_pos_max(shim_t *s) { return llama_memory_seq_pos_max(llama_get_memory(s->ctx), 0); }
