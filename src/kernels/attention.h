/* Flash attention over an F16 KV cache, as llama.cpp b11192's CPU backend computes it (AVX2 "haswell" build).
 *
 * Mirrors ggml-cpu/ops.cpp `ggml_compute_forward_flash_attn_ext_f16` and the three paths it dispatches to:
 *
 *   BK_ATTN_ONE_CHUNK  `..._f16_one_chunk`: one query row of one head at a time; Q rounded to F16, scores by
 *                      ggml_vec_dot_f16, online softmax with libm expf, an F16 accumulator rounded after every
 *                      update (ggml_vec_scale_f16 / ggml_vec_mad_f16), S = fma(S, ms, vs); out = A * (1/S).
 *                      Cells whose mask is -inf are skipped entirely.
 *   BK_ATTN_TILED      `..._tiled`: tiles of 64 query rows x 64 cells, K and V widened to F32, KQ and VKQ by
 *                      simd_gemm (one fma chain per element), softmax per tile with ggml_v_expf and a double
 *                      sum (ggml_vec_soft_max_f32), rescale by libm expf on a new maximum.
 *   BK_ATTN_SPLIT_KV   split-KV decode: the cells are cut into `oracle_nth` chunks (llama-server's -t), each
 *                      chunk runs the one-chunk recurrence and leaves (M, S, A) partials, then
 *                      `ggml_flash_attn_ext_reduce_partials` merges them in chunk order. The result depends on
 *                      oracle_nth, never on the number of threads bankml runs with.
 *
 * Which path (ggml-cpu/ops.cpp, this build): SPLIT_KV when n_tokens == 1 and n_kv >= 512; else TILED when
 * n_tokens >= 64 and dv % 8 == 0; else ONE_CHUNK. The tiled path's query tiles are cut from the oracle's row
 * chunks (ggml's 4-chunks-per-thread rule with nth = oracle_nth), so that a tile skips exactly the KV tiles the
 * oracle's tile skips: that is reproduced too, whatever nth is.
 *
 * Threads: every function taking (ith, nth) is called by each of nth threads with its own ith (0..nth-1), e.g.
 * inside one OpenMP parallel region; each computes its share. Shares never overlap, results do not depend on
 * nth. Nothing here allocates, locks or synchronises: where two phases must meet (split-KV), the caller puts
 * a barrier between them.
 *
 * Layouts (all strides in elements, not bytes; any stride >= the row it spans):
 *   q     IN   float   q[t*q_row + h*q_head + d]           t < n_tokens, h < n_head,    d < dk
 *   k     IN   F16     k[c*k_cell + hk*k_head + d]         c < n_kv,     hk < n_head_kv, d < dk
 *   v     IN   F16     v[c*v_cell + hk*v_head + d]         c < n_kv,     hk < n_head_kv, d < dv
 *   mask  IN   F16     mask[t*mask_row + c]                0 to keep a cell, -inf to drop it (any F16 is added)
 *   out   OUT  float   out[t*out_row + h*out_head + d]     d < dv; may not alias q, k, v, mask or scratch
 *   Query head h reads KV head h / (n_head / n_head_kv) (GQA). llama.cpp's layout: q_row = n_head*dk,
 *   q_head = dk; k_cell = n_head_kv*dk (one cache row per cell), k_head = dk; same for v; mask_row = n_kv;
 *   out_row = n_head*dv, out_head = dv (heads concatenated, ready for wo).
 * F16 values are IEEE binary16 bit patterns (uint16_t).
 *
 * Not covered (llama.cpp options SmolLM2/llama and Gemma 3 do not use): ALiBi (max_bias), logit softcap,
 * attention sinks, F32 K/V, more than one KV stream.
 */
#ifndef BK_ATTENTION_H
#define BK_ATTENTION_H
#include <stddef.h>
#include <stdint.h>

#define BK_ATTN_TILE_Q 64        /* GGML_FA_TILE_Q */
#define BK_ATTN_TILE_KV 64       /* GGML_FA_TILE_KV */
#define BK_ATTN_SPLIT_MIN_KV 512 /* split-KV when one query row and n_kv >= this */

enum bk_attn_path {
    BK_ATTN_ONE_CHUNK = 0,
    BK_ATTN_TILED = 1,
    BK_ATTN_SPLIT_KV = 2,
};

/* Status codes of bk_attn_f16_check. */
enum bk_attn_status {
    BK_ATTN_OK = 0,
    BK_ATTN_BAD_SHAPE = 1,   /* a count <= 0, or n_head not a multiple of n_head_kv */
    BK_ATTN_BAD_STRIDE = 2,  /* a stride smaller than the row it spans */
    BK_ATTN_NULL = 3,        /* a NULL pointer */
    BK_ATTN_BAD_NTH = 4,     /* oracle_nth <= 0 */
};

typedef struct bk_attn_f16_args {
    int32_t n_tokens;   /* query rows of the ubatch */
    int32_t n_head;     /* query heads */
    int32_t n_head_kv;  /* KV heads, divides n_head */
    int32_t dk;         /* head size of Q and K */
    int32_t dv;         /* head size of V and of the output */
    int32_t n_kv;       /* cells attended over: cache cells 0 .. n_kv-1 (bk_kv_n_kv) */
    float scale;        /* KQ scale: 1/sqrtf(dk) for llama (0.125 at dk 64), 1.0f for Gemma 3 */
    int32_t oracle_nth; /* the oracle's thread count (llama-server -t, 2 by default) */

    const float *q;       int64_t q_row, q_head;
    const uint16_t *k;    int64_t k_cell, k_head;
    const uint16_t *v;    int64_t v_cell, v_head;
    const uint16_t *mask; int64_t mask_row;
    float *out;           int64_t out_row, out_head;

    /* Scratch shared by all threads of one call, at least bk_attn_f16_scratch_floats(n_head, dk, dv,
     * oracle_nth, nth) floats, 32-byte aligned. Allocate once (for the largest shapes) and reuse. */
    float *scratch;
} bk_attn_f16_args;

/* The path ggml takes for a ubatch of n_tokens query rows over n_kv cells with V head size dv. */
int bk_attn_f16_path(int32_t n_tokens, int32_t n_kv, int32_t dv);

/* Floats of scratch that bk_attn_f16 / bk_attn_f16_reduce need with nth threads, for every path and every
 * n_tokens, n_kv. */
size_t bk_attn_f16_scratch_floats(int32_t n_head, int32_t dk, int32_t dv, int32_t oracle_nth, int32_t nth);

/* BK_ATTN_OK, or the first problem found in a (for the Python wrapper; the kernels do not check). */
int bk_attn_f16_check(const bk_attn_f16_args *a);

/* Phase 1, thread ith of nth. ONE_CHUNK and TILED: computes this thread's share of out; that is all.
 * SPLIT_KV: computes this thread's share of the (head, chunk) partials into scratch; out is written by
 * bk_attn_f16_reduce after a barrier. */
void bk_attn_f16(const bk_attn_f16_args *a, int ith, int nth);

/* Phase 2, thread ith of nth, only for SPLIT_KV (a no-op for the other paths): after every thread has
 * finished bk_attn_f16 on the same args, merges the partials of this thread's heads into out. */
void bk_attn_f16_reduce(const bk_attn_f16_args *a, int ith, int nth);

/* Convenience for one caller thread (tests, benchmarks): both phases with nth = 1. */
void bk_attn_f16_serial(const bk_attn_f16_args *a);

#endif
