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
 *   mask  IN   F16     mask[t*mask_row + c]                0 to keep a cell, -inf to drop it (any F16 is added);
 *                                                          NULL for none
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
    int32_t oracle_nth; /* the oracle's thread count for this ubatch: llama.cpp computes a 1-token ubatch with
                         * n_threads (llama-server -t) and larger ones with n_threads_batch (-tb, which
                         * defaults to -t); 2 by default on a 2-core machine */

    const float *q;       int64_t q_row, q_head;
    const uint16_t *k;    int64_t k_cell, k_head;
    const uint16_t *v;    int64_t v_cell, v_head;
    const uint16_t *mask; int64_t mask_row;
    float *out;           int64_t out_row, out_head;

    /* Scratch shared by all threads of one call, at least bk_attn_f16_scratch_floats(n_head, dk, dv,
     * oracle_nth, nth) floats, 32-byte aligned. Allocate once (for the largest shapes) and reuse. */
    float *scratch;

    /* Nonzero when this sequence's rows are one stream of a ubatch holding several streams (llama-server's
     * n > 1 choices decoding together in a non-unified cache): ggml's Q then has ne[3] > 1 and never takes
     * the split-KV path (ops.cpp: neq1 == 1 && neq3 == 1), so a 1-token row goes through the one-chunk path. */
    int32_t multi_stream;
    /* With multi_stream: the ubatch's streams (0 or 1: this call's rows are all of ggml's Q) and which one this
     * call computes (its rows are ggml's rows stream*n_tokens*n_head ..). The tiled path's row chunks are cut
     * over n_tokens*n_head*n_stream rows, as ggml cuts them for a Q with ne[3] = n_stream. */
    int32_t n_stream, stream;
} bk_attn_f16_args;

/* The path ggml takes for a ubatch of n_tokens query rows over n_kv cells with V head size dv. */
int bk_attn_f16_path(int32_t n_tokens, int32_t n_kv, int32_t dv);

/* The same for a ubatch with several streams (multi_stream nonzero): never split-KV. */
int bk_attn_f16_path_streams(int32_t n_tokens, int32_t n_kv, int32_t dv, int32_t multi_stream);

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
 * finished bk_attn_f16 on the same args (same scratch, same nth, nothing else using the scratch in between),
 * merges the partials of this thread's heads into out. */
void bk_attn_f16_reduce(const bk_attn_f16_args *a, int ith, int nth);

/* Convenience for one caller thread (tests, benchmarks): both phases with nth = 1. */
void bk_attn_f16_serial(const bk_attn_f16_args *a);

/* ---- Q8_0 KV cache (llama-server --cache-type-k q8_0 --cache-type-v q8_0), in attention_q8.c ----
 *
 * With a quantized cache llama.cpp b11192 rotates (src/llama-kv-cache.cpp attn_rot_k/attn_rot_v, when the head
 * size is a multiple of 64 and LLAMA_ATTN_ROT_DISABLE is unset; src/llama-graph.cpp build_attn): Q and K after
 * RoPE by a Walsh-Hadamard transform of bk_attn_rot_k_size(dk) values, V by one of 64 values, before K and V
 * are stored and Q attends; and the attention output by the 64-value transform again before wo (the
 * transform is its own inverse). The cache holds quantize_row_q8_0 (x86) of the rotated rows.
 * Flash attention over a Q8_0 cache always takes ggml's one-chunk path, whatever n_tokens and n_kv: Q rounded by
 * quantize_row_q8_0 per head, s = ggml_vec_dot_q8_0_q8_0(K, Qq), fl(s*scale), fl(+mask), online softmax with libm
 * expf, an F32 accumulator: A = fl(A*ms) on a new maximum, A = fma(dequant(V), vs, A), S = fma(S, ms, vs);
 * out = A * fl(1/S). No split-KV: the result does not depend on any thread count.
 */

/* In place, rows ith, ith+nth, ... of the n_rows rows of n floats (n a power of two) at x + r*row_stride:
 * ggml_compute_forward_fwht (llama_mul_mat_hadamard): y = fl(x * fl(1/sqrtf(n))), then for len = 1, 2, 4, ..
 * n/2 the butterflies (u, v) -> (u + v, u - v). For Q/K (n = bk_attn_rot_k_size(dk)) the rows are each head's
 * values split in n-sized pieces: with llama.cpp's layout, n_rows = n_tokens*n_head*dk/n over a contiguous
 * buffer (row_stride = n). Same for V and the attention output with n = 64. */
void bk_hadamard_rows(float *x, int64_t n_rows, int n, int64_t row_stride, int ith, int nth);

/* The rotation size for Q and K: the largest power of two >= 64 dividing dk (64 for dk 64, 256 for dk 256);
 * 0 when dk % 64 != 0 (then llama.cpp does not rotate). V and the output always use 64. */
int bk_attn_rot_k_size(int32_t dk);

typedef struct bk_attn_q8_0_args {
    int32_t n_tokens, n_head, n_head_kv, dk, dv, n_kv; /* dk, dv multiples of 32 */
    float scale;

    const float *q;       int64_t q_row, q_head;   /* floats, as for F16 (Q already rotated) */
    const uint8_t *k;     int64_t k_cell, k_head;  /* BYTES: Q8_0 blocks of 34 bytes; llama.cpp: k_cell =
                                                      n_head_kv*dk/32*34, k_head = dk/32*34 */
    const uint8_t *v;     int64_t v_cell, v_head;  /* BYTES, likewise */
    const uint16_t *mask; int64_t mask_row;        /* F16, as for F16 */
    float *out;           int64_t out_row, out_head;
    float *scratch;       /* bk_attn_q8_0_scratch_floats(n_head, dk, dv, nth) floats, 32-byte aligned */
} bk_attn_q8_0_args;

size_t bk_attn_q8_0_scratch_floats(int32_t n_head, int32_t dk, int32_t dv, int32_t nth);

/* BK_ATTN_OK, or the first problem found (BK_ATTN_BAD_SHAPE also when dk or dv is not a multiple of 32). */
int bk_attn_q8_0_check(const bk_attn_q8_0_args *a);

/* Thread ith of nth computes its share of out; one phase, no barrier needed inside. */
void bk_attn_q8_0(const bk_attn_q8_0_args *a, int ith, int nth);

#endif
