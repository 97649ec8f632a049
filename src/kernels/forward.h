/* The forward pass as llama.cpp b11192 runs it on the CPU (src/llama-context.cpp decode/split_simple,
 * src/llama-graph.cpp), one ubatch per OpenMP parallel region; each architecture's graph is its own file.
 *
 * Files:
 *   forward.h          this interface: model config, weights, KV cache, run state, decode
 *   forward_archs.h    the architectures: one line each (enum, GGUF name, ubatch graph function)
 *   forward_common.h/c the steps every graph shares (GET_ROWS, matmul sites, RoPE + cache store, attention,
 *                      SwiGLU, the head), allocation, weight regrouping, and the decode driver
 *   forward_llama.c    the llama graph (SmolLM2 and other llama files)
 * A new architecture is one forward_<name>.c holding its ubatch graph and one line in forward_archs.h.
 *
 * A llama_decode of N tokens (bk_fwd_decode) is cut into ubatches of n_ubatch tokens (split_simple, one
 * sequence); the last token is the only output, so only the last ubatch runs the last layer's FFN and the head.
 * The K and V of a ubatch enter the cache before its attention. Every MUL_MAT runs the kernel ggml picks for its
 * weight type and its number of columns (matmul.h); each op's float order is in its kernel's header.
 *
 * Threads: nth threads (bankml's own count) in one parallel region per ubatch, barriers where data meet.
 * The arithmetic never depends on nth; split-KV attention and the tiled path's query tiles follow oracle_nth
 * (llama-server's -t = -tb).
 *
 * Memory: weights are views (the mmap); the KV cache (bk_kv_cache) and the run state (bk_fwd_state) are
 * allocated once by their _alloc functions, zeroed, and freed by their _free functions. A second KV cache over
 * the same weights and state is a second bk_kv_cache (one ubatch runs at a time per state).
 */
#ifndef BK_FORWARD_H
#define BK_FORWARD_H
#include <stddef.h>
#include <stdint.h>

#include "kv.h"
#include "matmul.h"

/* The architectures with a graph (forward_archs.h), numbered from 0 in that file's order. */
enum bk_arch {
#define BK_ARCH(id, name, graph) id,
#include "forward_archs.h"
#undef BK_ARCH
    BK_ARCH_COUNT
};

/* The enum value of a GGUF general.architecture name, -1 when bankml has no graph for it. */
int bk_arch_from_name(const char *name);
/* The GGUF name of an architecture, NULL outside 0 .. BK_ARCH_COUNT-1. */
const char *bk_arch_name(int arch);

typedef struct bk_model_config {
    int32_t arch;       /* enum bk_arch: which graph runs */
    int32_t n_embd;     /* residual width */
    int32_t n_layer;
    int32_t n_head;     /* query heads */
    int32_t n_head_kv;  /* KV heads (GQA: n_head % n_head_kv == 0) */
    int32_t head_dim;   /* Q, K and V head size (llama: n_embd / n_head unless key_length says otherwise) */
    int32_t n_rot;      /* rotated dimensions (== head_dim for llama) */
    int32_t n_ff;       /* feed-forward width */
    int32_t n_vocab;
    float rms_eps;
    float rope_freq_base;
    float kq_scale;     /* 1/sqrtf(head_dim) for llama */
    /* options of other architectures (0 where the architecture has none; llama has none) */
    uint32_t n_swa;            /* sliding window of the layers marked swa (Gemma 3) */
    int32_t swa_type;          /* enum bk_swa_type of those layers */
    float rope_freq_base_swa;  /* RoPE base of the sliding-window layers (0: rope_freq_base) */
} bk_model_config;

/* One layer's weights. The norms a graph does not use are NULL (llama uses attn_norm and ffn_norm only). */
typedef struct bk_layer {
    const float *attn_norm;       /* float[n_embd] */
    const float *q_norm, *k_norm; /* float[head_dim], per-head RMS norm of Q and K (Gemma 3, Qwen3) or NULL */
    const float *attn_post_norm;  /* float[n_embd], norm of the attention output before the residual, or NULL */
    const float *ffn_norm;        /* float[n_embd] */
    const float *ffn_post_norm;   /* float[n_embd], norm of the FFN output before the residual, or NULL */
    int32_t swa;                  /* nonzero: the layer attends through the sliding window (config n_swa) */
    bk_matrix wq, wk, wv;         /* [n_head*hd | n_head_kv*hd] x n_embd */
    bk_matrix wo;                 /* n_embd x n_head*hd */
    bk_matrix gate, up;           /* n_ff x n_embd */
    bk_matrix down;               /* n_embd x n_ff */
} bk_layer;

typedef struct bk_model_weights {
    bk_matrix tok_embd;        /* n_vocab rows of n_embd; F32, F16, Q8_0, Q4_1, Q4_K, Q5_K or Q6_K */
    const float *output_norm;  /* float[n_embd] */
    bk_matrix output;          /* n_vocab x n_embd (tok_embd when tied) */
    const bk_layer *layers;    /* [n_layer] */
} bk_model_weights;

/* One sequence's KV cache: cells (kv.h rules) and, per layer, K and V rows of one cell each. */
typedef struct bk_kv_cache {
    bk_kv_cells cells;
    int32_t *pos_buf;        /* [size] */
    int32_t type;            /* BK_TYPE_F16 or BK_TYPE_Q8_0 (K and V alike) */
    uint32_t size;           /* cells: n_ctx rounded up to 256 */
    int32_t n_layer;
    size_t k_row_bytes;      /* bytes of one cell of one layer: n_head_kv*hd halves or Q8_0 blocks */
    size_t v_row_bytes;
    uint8_t *data;           /* n_layer * size * (k_row_bytes + v_row_bytes), zeroed */
    struct bk_kv_cache *swa; /* a model with sliding-window layers (cfg n_swa > 0): the cache those layers use
                              * (llama_kv_cache_iswa's SWA cache, bk_kv_cache_alloc_swa), else NULL; this one
                              * then serves the other layers */
} bk_kv_cache;

/* The activation buffer sets, one per type a MUL_MAT's input is prepared in (bk_act_type): slot 0 for F32
 * activations, then F16, Q8_0, Q8_1, Q8_K, BF16; BK_ACT_SLOTS of them. */
enum bk_act_slot { BK_ACT_F32, BK_ACT_F16, BK_ACT_Q8_0, BK_ACT_Q8_1, BK_ACT_Q8_K, BK_ACT_BF16, BK_ACT_SLOTS };

/* Buffers of one ubatch (sizes for n_ubatch tokens and caches of up to kv_max cells). */
typedef struct bk_fwd_state {
    int32_t n_ubatch;
    uint32_t kv_max;
    int32_t nth;           /* threads bankml runs the region with */
    int32_t oracle_nth;    /* llama-server's -t (= -tb) */
    float *x;              /* [n_ubatch][n_embd] residual stream */
    float *h;              /* [n_ubatch][max(n_embd, n_ff)] normed input / SwiGLU output */
    float *q, *k, *v;      /* [n_ubatch][n_head*hd], [n_ubatch][n_head_kv*hd] x 2 */
    float *att;            /* [n_ubatch][n_head*hd] attention output */
    float *gate, *up;      /* [n_ubatch][n_ff] */
    float *logits;         /* [n_vocab] */
    float *rope;           /* [n_ubatch][n_rot] cos/sin of each token's position */
    uint8_t *act[BK_ACT_SLOTS];       /* [n_ubatch][row bytes of max k] per slot (NULL when no matrix needs it) */
    uint8_t *act_down[BK_ACT_SLOTS];  /* the same for the down projection's input (written while gate/up still
                                       * read act) */
    uint8_t *act_priv[BK_ACT_SLOTS];  /* [nth][2][row bytes]: each thread's own activations of sites with 1 or 2
                                       * columns */
    size_t act_col[BK_ACT_SLOTS];     /* bytes between columns of act[s], act_down[s], act_priv[s] */
    float *scratch;        /* [nth][scratch_floats] */
    size_t scratch_floats;
    uint16_t *mask;        /* [n_ubatch][kv_max] */
    uint32_t *idxs;        /* [n_ubatch] */
    int32_t *pos;          /* [n_ubatch] */
    float *attn_scratch;
    float theta_scale;
    void *block;           /* the one allocation all of the above live in */
    /* models with sliding-window layers (cfg n_swa > 0; NULL / 0 otherwise) */
    float *y;              /* [n_ubatch][n_embd] a sub-layer's output before its post-norm */
    float *rope_swa;       /* [n_ubatch][n_rot] cos/sin with rope_freq_base_swa */
    uint16_t *mask_swa;    /* [n_ubatch][kv_max] the SWA cache's mask */
    uint32_t *idxs_swa;    /* [n_ubatch] the ubatch's cells in the SWA cache */
    float theta_scale_swa;
    uint8_t *act_q4k;      /* [n_ubatch][bk_act_row_bytes_q8_K(max k)]: a node's activations for a repacked Q4_K
                            * matrix, laid out for the whole node (bk_act_prepare_q4_K_8x8) */
    int32_t multi_stream;  /* set by the caller per decode: the sequence decodes in a ubatch with other streams
                            * (bk_attn_f16_args.multi_stream); 0 after bk_fwd_state_alloc */
} bk_fwd_state;

enum bk_forward_status {
    BK_FWD_OK = 0,
    BK_FWD_NO_MEMORY = 1,
    BK_FWD_CACHE_FULL = 2,   /* the ubatch's cells do not fit (nothing was changed) */
    BK_FWD_BAD_ARGS = 3,
};

/* Allocation (zeroed). Returns BK_FWD_OK, BK_FWD_NO_MEMORY or BK_FWD_BAD_ARGS. kv_type: BK_TYPE_F16 or
 * BK_TYPE_Q8_0. n_swa, swa_type: the cells' sliding window (kv.h; 0 and BK_SWA_NONE for none, as llama). */
int bk_kv_cache_alloc(bk_kv_cache *kv, const bk_model_config *cfg, uint32_t n_cells, int32_t kv_type,
                      uint32_t n_swa, int32_t swa_type);
void bk_kv_cache_free(bk_kv_cache *kv);
/* The SWA companion of a cache made for a model with cfg->n_swa > 0 (kv->swa): as llama_kv_cache_iswa makes it,
 * pad(min(kv->size, n_swa * n_seq + n_ubatch), 256) cells with the sliding-window cell rules (cfg n_swa,
 * swa_type); n_seq is 1 for a stream of one sequence, n_seq_max for a unified cache. bk_kv_cache_free frees it. */
int bk_kv_cache_alloc_swa(bk_kv_cache *kv, const bk_model_config *cfg, int32_t n_ubatch, int32_t n_seq);
/* Make an empty cache (bk_kv_cache_alloc, and its SWA companion when it has one) a unified one: its cells get a
 * sequence each (kv.h bk_kvu_*; bk_kv_cache_free frees it). Returns BK_FWD_OK, BK_FWD_NO_MEMORY or
 * BK_FWD_BAD_ARGS. */
int bk_kv_cache_make_unified(bk_kv_cache *kv);
uint8_t *bk_kv_cache_k(const bk_kv_cache *kv, int layer);
uint8_t *bk_kv_cache_v(const bk_kv_cache *kv, int layer);

int bk_fwd_state_alloc(bk_fwd_state *st, const bk_model_config *cfg, const bk_model_weights *w,
                       int32_t n_ubatch, uint32_t kv_max, int32_t nth, int32_t oracle_nth);
void bk_fwd_state_free(bk_fwd_state *st);

/* Regroup every Q4_1 / Q8_0 matrix of the layers and the head by 8 rows (rows8.h; tok_embd's GET_ROWS keeps
 * reading the file), with nth threads; bk_fwd_unpack frees the copies. The weights then no longer need the
 * file's pages of those matrices. */
int bk_fwd_pack(bk_model_weights *w, bk_layer *layers, int n_layer, int nth);
void bk_fwd_unpack(bk_model_weights *w, bk_layer *layers, int n_layer);

/* One llama_decode with cfg->arch's graph: tokens[0..n) at positions pos0 .. pos0+n-1, in ubatches of
 * st->n_ubatch; the logits of the last token land in st->logits. The cache must hold exactly positions
 * 0 .. pos0-1 (the caller checks), and the tokens must be valid ids. Returns BK_FWD_OK, BK_FWD_BAD_ARGS (also
 * for an arch without a graph), or BK_FWD_CACHE_FULL before anything is computed. */
int bk_fwd_decode(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv, bk_fwd_state *st,
                  const int32_t *tokens, int32_t n, int32_t pos0);

/* bk_fwd_decode with embeddings on (llama_set_embeddings(ctx, true)): every token is an output, and the final
 * norm's output (t_embd) of token i lands at embd + i*n_embd (float[n][n_embd], the caller's); no logits. Each
 * ubatch's rows are computed as llama.cpp computes them when n_outputs == n_tokens (the last layer over every
 * column); pooling is the caller's (pool.h). */
int bk_fwd_decode_embd(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv, bk_fwd_state *st,
                       const int32_t *tokens, int32_t n, int32_t pos0, float *embd);

/* One ubatch of ns sequences with embeddings on, as split_equal cuts llama-server's batch of embedding prompts on
 * a split KV cache (-np N without -kvu): stream s (streams[s], distinct caches of one size and type) gets the nst
 * tokens tokens[s*nst .. (s+1)*nst) at positions pos0[s] .. pos0[s]+nst-1 (its cache holds exactly 0 .. pos0[s]-1,
 * the caller checks). Computed as one ubatch of bk_fwd_decode_seqs (ns == 1: as bk_fwd_decode), every row an
 * output: t_embd of row r (stream r / nst) lands at embd + r*n_embd. The caller plans the ubatches (split_equal)
 * and pools them (pool.h bk_pool_mean_ubatch). llama graph only. Returns BK_FWD_OK, BK_FWD_BAD_ARGS or
 * BK_FWD_CACHE_FULL before any cell changes. */
int bk_fwd_decode_embd_streams(const bk_model_config *cfg, const bk_model_weights *w, bk_fwd_state *st,
                               bk_kv_cache *const *streams, int32_t ns, const int32_t *tokens, int32_t nst,
                               const int32_t *pos0, float *embd);

/* ---- several sequences in one llama_decode (llama-server's update_slots batch, non-unified KV: -np N, no -kvu) */

/* One sequence's share of a multi-sequence llama_decode (bk_fwd_decode_seqs), in the batch's order. */
typedef struct bk_fwd_seq {
    bk_kv_cache *kv;        /* the sequence's own cache (its KV stream); every seq's cache has the same size */
    int32_t seq_id;         /* llama_seq_id (llama-server: the slot id), 0 .. BK_FWD_MAX_SEQ-1, unique */
    const int32_t *tokens;  /* [n], valid ids */
    int32_t n;              /* > 0 */
    int32_t pos0;           /* positions pos0 .. pos0+n-1; the cache holds exactly 0 .. pos0-1 (caller checks) */
    int32_t output;         /* nonzero: the logits of its last token are wanted */
} bk_fwd_seq;

#define BK_FWD_MAX_SEQ 256  /* LLAMA_MAX_SEQ */

/* One llama_decode of n_seqs sequences as libllama b11192 runs it with one KV stream per sequence
 * (llama_kv_cache::init_batch with n_stream > 1: llama_batch_allocr::split_equal(n_ubatch, sequential)):
 * each ubatch takes, from the first sequence with tokens left, the run of sequences whose ids follow one
 * another (in batch order), and the same number of tokens of each (the fewest any of them has left, at most
 * n_ubatch / their count); rows are grouped by sequence. A ubatch of one sequence is computed as bk_fwd_decode
 * computes it; one of several: every MUL_MAT over all its rows, RoPE and the cache store per sequence, the
 * attention per stream over n_kv = the largest of the streams' n_kv with the stream's own mask (ggml's Q with
 * ne[3] = streams: never split-KV; the tiled path's row chunks count every stream), the last layer's output
 * rows gathered (inp_out_ids), the head over them. Logits rows land in logits ([outputs][n_vocab], the
 * caller's) in the order they are computed, out_seq[i] naming the index in seqs of row i; *n_out their count.
 * A model with sliding-window layers (Gemma 3): each sequence's cache has its SWA companion (kv->swa), its
 * stream of llama_kv_cache_iswa's SWA cache; each ubatch's cells are found and applied in both, the SWA layers
 * attend over the SWA streams (n_kv the largest of theirs) with their window masks.
 * Returns BK_FWD_OK, BK_FWD_BAD_ARGS (an architecture other than llama, qwen3 and gemma3, a cache without the
 * SWA companion its model needs or with one it does not, caches of different sizes or types, a repeated or
 * out-of-range seq_id, more sequences than n_ubatch), BK_FWD_NO_MEMORY, or BK_FWD_CACHE_FULL before anything
 * is computed. */
int bk_fwd_decode_seqs(const bk_model_config *cfg, const bk_model_weights *w, bk_fwd_state *st,
                       const bk_fwd_seq *seqs, int32_t n_seqs, float *logits, int32_t *out_seq, int32_t *n_out);

/* ---- several sequences in one stream (llama-server -kvu, -np auto: a unified KV cache) */

/* One llama_decode of n tokens over a unified cache (bk_kv_cache_make_unified), as libllama b11192 runs it with
 * kv_unified (one stream): token i is sequence seq[i] at position pos[i], in the batch's order; the batch is cut
 * by split_simple (the next n_ubatch tokens in order, whatever their sequences); each ubatch's cells are found
 * for all ubatches before anything runs (bk_kv_find_slot: first empty cells from head) and applied before it
 * runs; n_kv from the highest used cell; each row's mask keeps the cells of its own sequence at positions <= its
 * own (bk_kvu_mask_f16); the attention path is the one-stream rule (split-KV for a lone row at n_kv >= 512,
 * tiled from 64 rows, else one-chunk). Rows with output[i] nonzero are outputs: the last layer goes on over
 * them (gathered, inp_out_ids) and their logits land in logits ([outputs][n_vocab], the caller's) in batch
 * order; *n_out their count. The caller checks tokens and positions (each sequence's next position). Returns
 * BK_FWD_OK, BK_FWD_BAD_ARGS (an architecture other than llama, qwen3 and gemma3, a cache that is not unified,
 * a seq id outside 0 .. BK_FWD_MAX_SEQ-1), BK_FWD_NO_MEMORY, or BK_FWD_CACHE_FULL before anything changes.
 * A model with sliding-window layers: kv->swa (unified too) is placed the same way after the base cache
 * (llama_kv_cache_iswa's simple split; find_slot reuses a SWA cell out of its own sequence's window and
 * apply_ubatch purges that sequence below it, kv.h), its rows masked by window too; when a ubatch does not fit
 * in either cache libllama would try split_equal instead, which is not reproduced: BK_FWD_CACHE_FULL. */
int bk_fwd_decode_unified(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv, bk_fwd_state *st,
                          const int32_t *tokens, const int32_t *pos, const int32_t *seq, const int8_t *output,
                          int32_t n, float *logits, int32_t *n_out);

/* bk_fwd_decode_unified with embeddings on (llama-server --embeddings at -np auto or -kvu): the same split_simple
 * ubatches, cells and masks, every row an output (llama-context.cpp decode: output_all), so each ubatch's last layer
 * runs over all its columns and the final norm's output (t_embd) of token i lands at embd + i*n_embd
 * (float[n][n_embd], the caller's, batch order); no logits. Pooling is the caller's, per ubatch of n_ubatch rows
 * (pool.h bk_pool_mean_rows). The llama graph only, without a sliding-window cache. Same returns. */
int bk_fwd_decode_embd_unified(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv,
                               bk_fwd_state *st, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                               int32_t n, float *embd);

#endif
