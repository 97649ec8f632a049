/* A thin C layer over the oracle's libllama (llama.cpp b11192) for batches of several sequences, as llama-server
 * makes its context for `-t T -c C -np N` (kv_unified false: one KV stream per sequence) or with `-kvu`.
 * Developer tool: built on demand by testing/record_multiseq.py into the oracle's cache; never part of bankml. */
#include <stdlib.h>
#include "llama.h"

typedef struct {
    struct llama_model *model;
    struct llama_context *ctx;
    struct llama_batch batch;
    int n_batch;
} mshim_t;

static void quiet(enum ggml_log_level level, const char *text, void *ud) { (void)level; (void)text; (void)ud; }

/* cache_q8: --cache-type-k q8_0 --cache-type-v q8_0 */
mshim_t *mshim_open(const char *path, int n_ctx, int n_seq, int unified, int n_threads, int cache_q8) {
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(path, llama_model_default_params());
    if (!model) return NULL;
    mshim_t *s = calloc(1, sizeof(*s));
    s->model = model;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx < 2048 ? n_ctx : 2048;
    cp.n_ubatch = cp.n_batch < 512 ? cp.n_batch : 512;
    cp.n_seq_max = n_seq;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    cp.kv_unified = unified != 0;
    cp.swa_full = false;  /* llama-server's default (common_params); libllama's own default is a full-size SWA cache */
    if (cache_q8) {
        cp.type_k = GGML_TYPE_Q8_0;
        cp.type_v = GGML_TYPE_Q8_0;
    }
    cp.no_perf = true;
    s->ctx = llama_init_from_model(model, cp);
    if (!s->ctx) { llama_model_free(model); free(s); return NULL; }
    s->n_batch = cp.n_batch;
    s->batch = llama_batch_init(s->n_batch, 0, 1);
    return s;
}

void mshim_close(mshim_t *s) {
    llama_batch_free(s->batch);
    llama_free(s->ctx);
    llama_model_free(s->model);
    free(s);
}

/* one llama_decode: token i at pos[i] of sequence seq[i], output flag out[i] */
int mshim_decode(mshim_t *s, const int *tok, const int *pos, const int *seq, const signed char *out, int n) {
    if (n > s->n_batch) return -100;
    s->batch.n_tokens = n;
    for (int i = 0; i < n; i++) {
        s->batch.token[i] = tok[i];
        s->batch.pos[i] = pos[i];
        s->batch.n_seq_id[i] = 1;
        s->batch.seq_id[i][0] = seq[i];
        s->batch.logits[i] = out[i];
    }
    return llama_decode(s->ctx, s->batch);
}

float *mshim_logits(mshim_t *s, int i) { return llama_get_logits_ith(s->ctx, i); }
int mshim_n_vocab(mshim_t *s) { return llama_vocab_n_tokens(llama_model_get_vocab(s->model)); }
void mshim_seq_rm(mshim_t *s, int seq) { llama_memory_seq_rm(llama_get_memory(s->ctx), seq, -1, -1); }
/* llama_memory_seq_rm(seq, p0, p1): part of a sequence (llama-server keeping a cached prefix), or seq -1 */
void mshim_seq_rm_range(mshim_t *s, int seq, int p0, int p1) {
    llama_memory_seq_rm(llama_get_memory(s->ctx), seq, p0, p1);
}
