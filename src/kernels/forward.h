/* The llama forward pass as llama.cpp b11192 builds and computes it on the CPU (src/models/llama.cpp,
 * src/llama-graph.cpp, src/llama-context.cpp decode/split_simple), one ubatch per OpenMP parallel region.
 *
 * Graph of one ubatch of n tokens at positions p0 .. p0+n-1 (each op's float order is in its kernel's header):
 *   x = GET_ROWS(token_embd, tokens)                                             (quants.h / fp16.h, exact)
 *   for each layer l:
 *     h = RMS_NORM(x) * attn_norm                                                 (norm.h)
 *     q, k, v = wq h, wk h, wv h                                                  (matmul.h; separate MUL_MATs)
 *     q, k = ROPE_NORMAL(q, p), ROPE_NORMAL(k, p)                                 (rope.h)
 *     [q8_0 cache: q, k, v rotated by the Hadamard transform]                    (attention.h)
 *     K, V cells of this ubatch <- k, v  (SET_ROWS: F16 RNE or quantize_row_q8_0) (kv.h)
 *     a = FLASH_ATTN_EXT(q, K, V, mask, 1/sqrt(head_dim)), heads concatenated    (attention.h)
 *     [q8_0 cache: a rotated back]
 *     a = wo a;  on the last layer only the output rows go on (inp_out_ids GET_ROWS)
 *     x = a + x
 *     h = RMS_NORM(x) * ffn_norm;  x = down(SWIGLU(gate h, up h)) + x            (act.h)
 *   logits = output (RMS_NORM(x) * output_norm)    (output = token_embd when the file has no output.weight)
 * Every MUL_MAT runs the kernel ggml picks for its weight type and its number of columns n (so the last
 * layer's wo sees the ubatch's n, its FFN and the head only the output rows).
 *
 * A llama_decode of N tokens (bk_llama_decode) is cut into ubatches of n_ubatch tokens (split_simple, one
 * sequence); the last token is the only output, so only the last ubatch runs the last layer's FFN and the head.
 * The K and V of a ubatch enter the cache before its attention.
 *
 * Threads: nth threads (bankml's own count) in one parallel region per ubatch, barriers where data meet.
 * The arithmetic never depends on nth; split-KV attention and the tiled path's query tiles follow oracle_nth
 * (llama-server's -t = -tb).
 *
 * Memory: weights are views (the mmap); the KV cache (bk_kv_cache) and the run state (bk_llama_state) are
 * allocated once by their _alloc functions, zeroed, and freed by their _free functions. A second KV cache over
 * the same weights and state is a second bk_kv_cache (one ubatch runs at a time per state).
 */
#ifndef BK_FORWARD_H
#define BK_FORWARD_H
#include <stddef.h>
#include <stdint.h>

#include "kv.h"
#include "matmul.h"

typedef struct bk_llama_config {
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
    float kq_scale;     /* 1/sqrtf(head_dim) */
} bk_llama_config;

typedef struct bk_llama_layer {
    const float *attn_norm;  /* float[n_embd] */
    const float *ffn_norm;   /* float[n_embd] */
    bk_matrix wq, wk, wv;    /* [n_head*hd | n_head_kv*hd] x n_embd */
    bk_matrix wo;            /* n_embd x n_head*hd */
    bk_matrix gate, up;      /* n_ff x n_embd */
    bk_matrix down;          /* n_embd x n_ff */
} bk_llama_layer;

typedef struct bk_llama_weights {
    bk_matrix tok_embd;        /* n_vocab rows of n_embd; F32, F16, Q8_0 or Q4_1 */
    const float *output_norm;  /* float[n_embd] */
    bk_matrix output;          /* n_vocab x n_embd (tok_embd when tied) */
    const bk_llama_layer *layers;  /* [n_layer] */
} bk_llama_weights;

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
} bk_kv_cache;

/* Buffers of one ubatch (sizes for n_ubatch tokens and caches of up to kv_max cells). */
typedef struct bk_llama_state {
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
    uint8_t *act[4];       /* per activation type (F32, F16, Q8_0, Q8_1): [n_ubatch][row bytes of max k] */
    uint8_t *act_down[4];  /* the same for the down projection's input (written while gate/up still read act) */
    uint8_t *act_priv[4];  /* [nth][2][row bytes]: each thread's own activations of sites with 1 or 2 columns */
    size_t act_col[4];     /* bytes between columns of act[i], act_down[i], act_priv[i] */
    float *scratch;        /* [nth][scratch_floats] */
    size_t scratch_floats;
    uint16_t *mask;        /* [n_ubatch][kv_max] */
    uint32_t *idxs;        /* [n_ubatch] */
    int32_t *pos;          /* [n_ubatch] */
    float *attn_scratch;
    float theta_scale;
    void *block;           /* the one allocation all of the above live in */
    int32_t multi_stream;  /* set by the caller per decode: the sequence decodes in a ubatch with other streams
                            * (bk_attn_f16_args.multi_stream); 0 after bk_llama_state_alloc */
} bk_llama_state;

enum bk_forward_status {
    BK_FWD_OK = 0,
    BK_FWD_NO_MEMORY = 1,
    BK_FWD_CACHE_FULL = 2,   /* the ubatch's cells do not fit (nothing was changed) */
    BK_FWD_BAD_ARGS = 3,
};

/* Allocation (zeroed). Returns BK_FWD_OK or BK_FWD_NO_MEMORY. kv_type: BK_TYPE_F16 or BK_TYPE_Q8_0. */
int bk_kv_cache_alloc(bk_kv_cache *kv, const bk_llama_config *cfg, uint32_t n_cells, int32_t kv_type);
void bk_kv_cache_free(bk_kv_cache *kv);
uint8_t *bk_kv_cache_k(const bk_kv_cache *kv, int layer);
uint8_t *bk_kv_cache_v(const bk_kv_cache *kv, int layer);

int bk_llama_state_alloc(bk_llama_state *st, const bk_llama_config *cfg, const bk_llama_weights *w,
                         int32_t n_ubatch, uint32_t kv_max, int32_t nth, int32_t oracle_nth);
void bk_llama_state_free(bk_llama_state *st);

/* Regroup every Q4_1 / Q8_0 matrix of the layers and the head by 8 rows (rows8.h; tok_embd's GET_ROWS keeps
 * reading the file), with nth threads; bk_llama_unpack frees the copies. The weights then no longer need the
 * file's pages of those matrices. */
int bk_llama_pack(bk_llama_weights *w, bk_llama_layer *layers, int n_layer, int nth);
void bk_llama_unpack(bk_llama_weights *w, bk_llama_layer *layers, int n_layer);

/* One llama_decode: tokens[0..n) at positions pos0 .. pos0+n-1, in ubatches of st->n_ubatch; the logits of the
 * last token land in st->logits. The cache must hold exactly positions 0 .. pos0-1 (the caller checks), and the
 * tokens must be valid ids. Returns BK_FWD_OK, or BK_FWD_CACHE_FULL before anything is computed. */
int bk_llama_decode(const bk_llama_config *cfg, const bk_llama_weights *w, bk_kv_cache *kv, bk_llama_state *st,
                    const int32_t *tokens, int32_t n, int32_t pos0);

#endif
