/* The steps the architectures' graphs share (forward_<arch>.c), the ubatch they run on, and the graph table's
 * declarations. Each step is called by every thread of the ubatch's parallel region with its own ith of nth and
 * does this thread's share.
 *
 * Barriers: a step never ends with one; the graph puts `#pragma omp barrier` where the next step reads what
 * other threads wrote. A step holds a barrier inside only where its own inputs meet (each says where), so the
 * count of barriers of a graph is what its file shows plus those.
 *
 * Activations: a MUL_MAT site prepares its input columns (RMS norm first, or the Hadamard rotation) in each
 * activation type its matrices take (bk_act_type), then runs its jobs, each a matrix with its output and an
 * optional residual added by the kernel (bk_matmul's res). A site of at most two columns prepares them in every
 * thread privately (no barrier); more: each thread its share into the shared buffers, then a barrier.
 */
#ifndef BK_FORWARD_COMMON_H
#define BK_FORWARD_COMMON_H
#include <stddef.h>
#include <stdint.h>

#include "forward.h"

/* One ubatch as a graph sees it: made by bk_fwd_decode before the region, read-only inside it. */
typedef struct bk_ubatch {
    const bk_model_config *cfg;
    const bk_model_weights *w;
    bk_kv_cache *kv;
    bk_fwd_state *st;        /* st->pos, st->idxs: the ubatch's positions and cells */
    const int32_t *tokens;   /* [n] */
    int n;                   /* tokens of the ubatch (columns of its MUL_MAT nodes) */
    uint32_t n_kv;           /* cells attention runs over (bk_kv_n_kv) */
    int want_logits;         /* the last ubatch of the decode: its last token is the output */
    int q8;                  /* the cache is Q8_0 (else F16) */
    int rot_k;               /* Q8_0 cache: Hadamard size of Q and K (bk_attn_rot_k_size), 0 for no rotation */
    int rot_out;             /* V and the attention output rotate by 64 (a Q8_0 cache with rot_k) */
    int attn_path;           /* F16 cache: the flash-attention path (enum bk_attn_path) */
    float *embd;             /* NULL, or every token is an output (llama-context.cpp decode with embeddings:
                              * output_all): the last layer goes on over every column and the final norm's
                              * output (t_embd) of token t lands at embd + t*n_embd; no logits */
    /* sliding-window layers (kv->swa; NULL / 0 otherwise): their cache, its n_kv and path; its cells are
     * st->idxs_swa, its mask st->mask_swa, the RoPE cos/sin of its base st->rope_swa. With several streams
     * kv_swa is the first stream's (it only says the layers have one); stream s's is streams[s]->swa and n_kv_swa
     * the largest of theirs */
    bk_kv_cache *kv_swa;
    uint32_t n_kv_swa;
    int attn_path_swa;
    /* the output rows: the last layer goes on over columns out_c0 .. out_c0+n_out-1 and the head writes n_out
     * rows of logits (one-sequence calls: out_c0 = n-1, n_out = 1 when want_logits) */
    int64_t out_c0;
    int n_out;
    float *logits;           /* NULL: st->logits; else [n_out][n_vocab] */
    /* several KV streams in the ubatch (bk_fwd_decode_seqs; n_stream 0 otherwise, kv is then the cache):
     * stream s holds rows s*n_seq_tokens .. (s+1)*n_seq_tokens-1 and its cells are streams[s]'s; the output
     * rows out_rows[0 .. n_out) are gathered into columns 0 .. n_out-1 before the last layer's wo */
    int n_stream;
    int n_seq_tokens;
    bk_kv_cache *const *streams;
    const int32_t *out_rows;
    /* a unified cache (bk_fwd_decode_unified; NULL otherwise): row t belongs to sequence row_seq[t], its mask
     * keeps only that sequence's cells (bk_kvu_mask_f16); out_rows, when set, gathers the output rows */
    const int32_t *row_seq;
} bk_ubatch;

/* An architecture's graph of one ubatch (forward_archs.h names one per architecture). */
typedef void (*bk_ubatch_graph)(const bk_ubatch *u, int ith, int nth);
#define BK_ARCH(id, name, graph) void graph(const bk_ubatch *u, int ith, int nth);
#include "forward_archs.h"
#undef BK_ARCH

/* One MUL_MAT of a site: out = W x (+ res), column c at out + c*out_col (res laid out like out). */
typedef struct bk_mm_job {
    const bk_matrix *W;  /* NULL: no job (ends a site's list) */
    float *out;
    int64_t out_col;
    const float *res;    /* NULL or the residual */
} bk_mm_job;

#define BK_SITE_JOBS 3

/* A MUL_MAT site: the input columns c0 .. c0+nc-1 and the matrices that read them. */
typedef struct bk_site {
    const float *x;      /* column c at x + c*x_row, k floats */
    int64_t x_row;
    int32_t k;
    const float *norm;   /* RMS_NORM(x) * norm first (shared columns are normed into the state's h, same rows),
                          * or NULL */
    int rotate64;        /* no norm: the Hadamard rotation by 64 first (the Q8_0 cache's attention output) */
    int64_t c0;
    int nc;
    int n_node;          /* columns of the ggml MUL_MAT node: decides the F16/F32 kernels (bk_matmul) */
    bk_mm_job jobs[BK_SITE_JOBS];
} bk_site;

/* The ubatch's inputs: x = GET_ROWS(token_embd, tokens) (exact), the KQ mask, the RoPE cos/sin of each position
 * (and with a SWA cache its mask and the cos/sin of the SWA base). By tokens. */
void bk_fwd_embed(const bk_ubatch *u, int ith, int nth);

/* A site: prepare its columns (a barrier inside when they are shared), then run its jobs, the rows of each split
 * over the threads (bk_matmul_split). */
void bk_fwd_site(const bk_ubatch *u, const bk_site *s, int ith, int nth);

/* W is a Q4_K matrix repacked by 8 rows (q4_K_8x8). Its MUL_MAT takes the node's first n - n % 4 columns by
 * 4-column gemm (activations quantized four rows at a time) and the rest by gemv, so a column's bits depend on
 * its place in the node: a site over part of a node (nc < n_node) must not run such a matrix. */
int bk_fwd_repacked_q4_K(const bk_matrix *W);

/* The Q, K, V site of layer l: RMS_NORM(x) * attn_norm into q, k, v over the ubatch's n columns. */
void bk_fwd_qkv_site(const bk_ubatch *u, int l, int ith, int nth);

/* A site whose columns bk_fwd_swiglu prepared (the down projection): s->x, norm and rotate64 are not read. */
void bk_fwd_down_site(const bk_ubatch *u, const bk_site *s, int ith, int nth);

/* RoPE NORMAL of q and k, then K and V into the cells of layer l (F16 RNE, or with a Q8_0 cache the Hadamard
 * rotations and quantize_row_q8_0). F16: each thread ropes and stores the rows it computed in the Q, K, V site
 * just before (no barrier between them). Q8_0: whole rows are needed, so a barrier first, then by tokens. */
void bk_fwd_rope_store(const bk_ubatch *u, int l, int ith, int nth);

/* The per-head step of the graphs with Q/K norms (Gemma 3, Qwen3): each head of q and k RMS_NORM'd with layer
 * l's q_norm / k_norm, rotated by ROPE_NEOX (rope.h bk_rope_neox) with the cos/sin `rope` (float[n_rot] per
 * token), q then scaled by q_scale (ggml_scale; skipped when it is 1), and K and V stored into the cells idxs of
 * kv's layer l: F16 RNE, or with a Q8_0 cache (u->q8; qwen3 only) the Hadamard rotations of q, k and v and
 * quantize_row_q8_0 as bk_fwd_rope_store does. Whole heads are needed: by tokens, after a barrier that ends the
 * Q, K, V site. With several streams (u->n_stream) a row goes into its stream's cache (kv is not read); a unified
 * cache's rows (u->row_seq) all go into kv at their cells idxs. */
void bk_fwd_qk_norm_store(const bk_ubatch *u, int l, const bk_kv_cache *kv, const uint32_t *idxs,
                          const float *rope, float q_scale, int ith, int nth);

/* att = FLASH_ATTN_EXT(q, K, V, mask, kq_scale) over layer l's cells, heads concatenated: the F16 kernel (its
 * split-KV path with a barrier between its two phases) or the Q8_0 one. */
void bk_fwd_attention(const bk_ubatch *u, int l, int ith, int nth);

/* The same with several streams (u->n_stream), F16 or Q8_0: stream s's rows over its cache's cells (swa: its SWA
 * cache's, with u->n_kv_swa and st->mask_swa), attention scaled by `scale`. */
void bk_fwd_attention_streams(const bk_ubatch *u, int l, int swa, float scale, int ith, int nth);

/* h = SWIGLU(gate, up) for columns c0 .. c0+nc-1, each thread on the rows of gate/up it computed (its rows start
 * at a multiple of 32: whole quantization blocks), prepared for the down projection's activation type. */
void bk_fwd_swiglu(const bk_ubatch *u, const bk_matrix *down, int64_t c0, int nc, int ith, int nth);

/* t_embd = RMS_NORM(x) * output_norm for every token of the ubatch, into u->embd. By tokens. */
void bk_fwd_embd_rows(const bk_ubatch *u, int ith, int nth);

/* logits = output (RMS_NORM(x) * output_norm) for the output columns out_c0 .. out_c0+n_out-1 (one MUL_MAT node
 * of n_out columns). */
void bk_fwd_head(const bk_ubatch *u, int ith, int nth);

/* Several streams (u->out_rows): rows out_rows[i] of a (a_row floats each: the attention output, or Gemma 3's
 * projected one) and of x move to row i (llama-graph's inp_out_ids GET_ROWS, exact), by thread 0 in increasing i
 * (a row's source is never below its destination). */
void bk_fwd_gather_outputs(const bk_ubatch *u, float *a, int64_t a_row, int ith, int nth);

#endif
