/* One ubatch of several sequences with embeddings on (forward.h bk_fwd_decode_embd_streams): what libllama b11192
 * computes for a ubatch that split_equal cut from llama-server's batch of embedding prompts on a split KV cache
 * (-np N without -kvu). The caller plans the ubatches (which sequences, how many tokens each); this places the
 * rows in each stream's cells and runs the llama graph over them with every token an output. */
#include "forward_common.h"

#include "attention.h"

#include <omp.h>

int bk_fwd_decode_embd_streams(const bk_model_config *cfg, const bk_model_weights *w, bk_fwd_state *st,
                               bk_kv_cache *const *streams, int32_t ns, const int32_t *tokens, int32_t nst,
                               const int32_t *pos0, float *embd) {
    if (cfg->arch != BK_ARCH_LLAMA || ns <= 0 || nst <= 0 || (int64_t)ns * nst > st->n_ubatch || !embd || !tokens)
        return BK_FWD_BAD_ARGS;
    for (int32_t s = 0; s < ns; s++) {
        const bk_kv_cache *c = streams[s];
        if (!c || c->swa || c->size > st->kv_max || c->size != streams[0]->size || c->type != streams[0]->type ||
            pos0[s] < 0)
            return BK_FWD_BAD_ARGS;
        for (int32_t j = 0; j < s; j++)
            if (streams[j] == c) return BK_FWD_BAD_ARGS;
        if ((int64_t)pos0[s] + nst > (int64_t)c->size) return BK_FWD_CACHE_FULL;
    }
    /* every stream's cells first (a full stream leaves none changed), then the ubatch over the largest n_kv */
    for (int32_t s = 0; s < ns; s++) {
        for (int32_t j = 0; j < nst; j++) st->pos[s * nst + j] = pos0[s] + j;
        if (bk_kv_find_slot(&streams[s]->cells, st->pos + s * nst, (uint32_t)nst, st->idxs + s * nst) != 0)
            return BK_FWD_CACHE_FULL;
    }
    uint32_t n_kv = 0;
    for (int32_t s = 0; s < ns; s++) {
        bk_kv_apply_ubatch(&streams[s]->cells, st->idxs + s * nst, st->pos + s * nst, (uint32_t)nst);
        const uint32_t nk = bk_kv_n_kv(&streams[s]->cells);
        if (nk > n_kv) n_kv = nk;
    }
    const int nu = ns * nst;
    const int q8 = streams[0]->type == BK_TYPE_Q8_0;
    const int rot_k = q8 ? bk_attn_rot_k_size(cfg->head_dim) : 0;
    bk_ubatch u = {
        .cfg = cfg, .w = w, .kv = streams[0], .st = st, .tokens = tokens, .n = nu, .n_kv = n_kv,
        .out_c0 = nu - 1, .q8 = q8, .rot_k = rot_k, .rot_out = q8 && rot_k, .embd = embd,
        .attn_path = bk_attn_f16_path_streams(nu, (int32_t)n_kv, cfg->head_dim, ns > 1),
    };
    if (ns > 1) {
        u.n_stream = ns;
        u.n_seq_tokens = nst;
        u.streams = streams;
    }
#pragma omp parallel num_threads(st->nth)
    bk_llama_ubatch(&u, omp_get_thread_num(), omp_get_num_threads());
    return BK_FWD_OK;
}
