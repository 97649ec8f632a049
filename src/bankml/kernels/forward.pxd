# src/kernels/forward.h: the forward pass (model config, weights, KV cache, run state, decode).
from libc.stdint cimport int8_t, int32_t, uint8_t, uint32_t

from bankml.kernels.kv cimport bk_kv_cells
from bankml.kernels.matmul cimport bk_matrix

cdef extern from "forward.h" nogil:
    int BK_ARCH_COUNT
    int bk_arch_from_name(const char *name)
    const char *bk_arch_name(int arch)
    ctypedef struct bk_model_config:
        int32_t arch
        int32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot, n_ff, n_vocab
        float rms_eps, rope_freq_base, kq_scale
        uint32_t n_swa
        int32_t swa_type
        float rope_freq_base_swa
    ctypedef struct bk_layer:
        const float *attn_norm
        const float *q_norm
        const float *k_norm
        const float *attn_post_norm
        const float *ffn_norm
        const float *ffn_post_norm
        int32_t swa
        bk_matrix wq, wk, wv, wo, gate, up, down
    ctypedef struct bk_model_weights:
        bk_matrix tok_embd
        const float *output_norm
        bk_matrix output
        const bk_layer *layers
    ctypedef struct bk_kv_cache:
        bk_kv_cells cells
        int32_t type
        uint32_t size
        int32_t n_layer
        size_t k_row_bytes, v_row_bytes
        uint8_t *data
        void *swa     # bk_kv_cache *: the sliding-window layers' cache, or NULL
    ctypedef struct bk_fwd_state:
        int32_t n_ubatch, nth, oracle_nth
        uint32_t kv_max
        float *logits
        int32_t multi_stream
    int BK_FWD_OK, BK_FWD_NO_MEMORY, BK_FWD_CACHE_FULL, BK_FWD_BAD_ARGS
    int bk_kv_cache_alloc(bk_kv_cache *kv, const bk_model_config *cfg, uint32_t n_cells, int32_t kv_type,
                          uint32_t n_swa, int32_t swa_type)
    void bk_kv_cache_free(bk_kv_cache *kv)
    int bk_kv_cache_alloc_swa(bk_kv_cache *kv, const bk_model_config *cfg, int32_t n_ubatch, int32_t n_seq)
    int bk_kv_cache_make_unified(bk_kv_cache *kv)
    uint8_t *bk_kv_cache_k(const bk_kv_cache *kv, int layer)
    uint8_t *bk_kv_cache_v(const bk_kv_cache *kv, int layer)
    int bk_fwd_state_alloc(bk_fwd_state *st, const bk_model_config *cfg, const bk_model_weights *w,
                           int32_t n_ubatch, uint32_t kv_max, int32_t nth, int32_t oracle_nth)
    void bk_fwd_state_free(bk_fwd_state *st)
    int bk_fwd_pack(bk_model_weights *w, bk_layer *layers, int n_layer, int nth)
    void bk_fwd_unpack(bk_model_weights *w, bk_layer *layers, int n_layer)
    int bk_fwd_decode(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv,
                      bk_fwd_state *st, const int32_t *tokens, int32_t n, int32_t pos0)
    int bk_fwd_decode_embd(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv,
                           bk_fwd_state *st, const int32_t *tokens, int32_t n, int32_t pos0, float *embd)
    int bk_fwd_decode_embd_streams(const bk_model_config *cfg, const bk_model_weights *w, bk_fwd_state *st,
                                   bk_kv_cache *const *streams, int32_t ns, const int32_t *tokens, int32_t nst,
                                   const int32_t *pos0, float *embd)
    # several sequences in one llama_decode (non-unified KV: one stream per sequence)
    int BK_FWD_MAX_SEQ
    ctypedef struct bk_fwd_seq:
        bk_kv_cache *kv
        int32_t seq_id
        const int32_t *tokens
        int32_t n, pos0, output
    int bk_fwd_decode_seqs(const bk_model_config *cfg, const bk_model_weights *w, bk_fwd_state *st,
                           const bk_fwd_seq *seqs, int32_t n_seqs, float *logits, int32_t *out_seq,
                           int32_t *n_out)
    # several sequences in one stream (a unified KV cache)
    int bk_fwd_decode_unified(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv,
                              bk_fwd_state *st, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                              const int8_t *output, int32_t n, float *logits, int32_t *n_out)
    int bk_fwd_decode_embd_unified(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv,
                                   bk_fwd_state *st, const int32_t *tokens, const int32_t *pos,
                                   const int32_t *seq, int32_t n, float *embd)
