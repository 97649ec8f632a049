/* The llama graph of one ubatch as llama.cpp b11192 builds it (src/models/llama.cpp, src/llama-graph.cpp) and
 * its CPU backend computes it. Each line is a step of forward_common.h; each op's float order is in its
 * kernel's header.
 *
 * One ubatch of n tokens at positions p0 .. p0+n-1:
 *   x = GET_ROWS(token_embd, tokens)                                             (quants.h / fp16.h, exact)
 *   for each layer l:
 *     h = RMS_NORM(x) * attn_norm                                                 (norm.h)
 *     q, k, v = wq h, wk h, wv h                                                  (matmul.h; separate MUL_MATs)
 *     q, k = ROPE_NORMAL(q, p), ROPE_NORMAL(k, p)                                 (rope.h)
 *     [q8_0 cache: q, k, v rotated by the Hadamard transform]                    (attention.h)
 *     K, V cells of this ubatch <- k, v  (SET_ROWS: F16 RNE or quantize_row_q8_0) (kv.h)
 *     a = FLASH_ATTN_EXT(q, K, V, mask, kq_scale), heads concatenated            (attention.h)
 *     [q8_0 cache: a rotated back]
 *     x = wo a + x;  on the last layer only the output rows go on (inp_out_ids GET_ROWS)
 *     h = RMS_NORM(x) * ffn_norm;  x = down(SWIGLU(gate h, up h)) + x            (act.h)
 *   logits = output (RMS_NORM(x) * output_norm)    (output = token_embd when the file has no output.weight)
 * The last layer's wo runs over the ubatch's n columns (its MUL_MAT node has n), its FFN and the head over the
 * output rows only (the last row; with several sequences each one's output row, gathered first). A ubatch
 * without outputs (want_logits 0) ends with the last layer's K and V.
 * With embeddings (u->embd) every token is an output: the last layer runs over all n columns like the others,
 * and t_embd = RMS_NORM(x) * output_norm of every row is the result (src/models/llama.cpp res->t_embd); the head
 * is not computed (the server reads no logits of an embedding batch).
 *
 * Qwen3 (src/models/qwen3.cpp) is this graph with one step changed: after the Q, K, V products each head of q and
 * of k goes through RMS_NORM(.) * attn_q_norm / attn_k_norm (a head_dim vector shared by the heads) and then
 * ROPE_NEOX instead of ROPE_NORMAL (the step Gemma 3 has, forward_common.h bk_fwd_qk_norm_store; no query
 * scale: attention scales by 1/sqrt(head_dim) as llama does). Its loader takes no bias, no rope_freqs and no
 * attention-scale key. With a Q8_0 cache the Hadamard rotations and the Q8_0 store follow the NEOX RoPE as they
 * follow llama's NORMAL one.
 */
#include "forward_common.h"

/* qk_norm: Qwen3's per-head Q/K norms and NEOX RoPE in place of llama's NORMAL RoPE */
static void llama_graph(const bk_ubatch *u, int qk_norm, int ith, int nth) {
    const bk_model_config *cfg = u->cfg;
    bk_fwd_state *st = u->st;
    const int E = cfg->n_embd, F = cfg->n_ff, n = u->n;
    const int64_t nq = (int64_t)cfg->n_head * cfg->head_dim, nk = (int64_t)cfg->n_head_kv * cfg->head_dim;

    bk_fwd_embed(u, ith, nth);
#pragma omp barrier

    for (int l = 0; l < cfg->n_layer; l++) {
        const bk_layer *L = &u->w->layers[l];
        const int last = l == cfg->n_layer - 1 && !u->embd;
        /* the columns that go on after attention: all, or on the last layer the output rows only */
        const int64_t c0 = last ? u->out_c0 : 0;
        const int nc = last ? u->n_out : n;

        /* attention */
        bk_fwd_qkv_site(u, l, ith, nth);
        if (qk_norm) {
#pragma omp barrier
            bk_fwd_qk_norm_store(u, l, u->kv, st->idxs, st->rope, 1.0f, ith, nth);
        } else {
            bk_fwd_rope_store(u, l, ith, nth);
        }
#pragma omp barrier
        bk_fwd_attention(u, l, ith, nth);
#pragma omp barrier
        if (last && !u->want_logits) break;
        /* output projection + residual. wo's node has the ubatch's n columns and the output rows are taken after
         * it: on the last layer the site runs the output columns only, unless wo is a repacked Q4_K matrix (a
         * column's gemm or gemv follows its place among the n): then all n columns, gathered after */
        const int wo_all = last && bk_fwd_repacked_q4_K(&L->wo);
        if (last && u->out_rows && !wo_all) {
            bk_fwd_gather_outputs(u, st->att, nq, ith, nth);
#pragma omp barrier
        }
        bk_fwd_site(u, &(const bk_site){
            .x = st->att, .x_row = nq, .k = (int32_t)nq, .rotate64 = u->rot_out, .c0 = wo_all ? 0 : c0,
            .nc = wo_all ? n : nc, .n_node = n, .jobs = {{.W = &L->wo, .out = st->x, .out_col = E, .res = st->x}}},
            ith, nth);
#pragma omp barrier
        if (wo_all && u->out_rows) {
            bk_fwd_gather_outputs(u, st->att, nq, ith, nth);
#pragma omp barrier
        }

        /* feed-forward: norm, gate and up, SwiGLU, down + residual */
        bk_fwd_site(u, &(const bk_site){
            .x = st->x, .x_row = E, .k = E, .norm = L->ffn_norm, .c0 = c0, .nc = nc, .n_node = nc,
            .jobs = {{.W = &L->gate, .out = st->gate, .out_col = F},
                     {.W = &L->up, .out = st->up, .out_col = F}}}, ith, nth);
        bk_fwd_swiglu(u, &L->down, c0, nc, ith, nth);
#pragma omp barrier
        bk_fwd_down_site(u, &(const bk_site){
            .c0 = c0, .nc = nc, .n_node = nc,
            .jobs = {{.W = &L->down, .out = st->x, .out_col = E, .res = st->x}}}, ith, nth);
#pragma omp barrier
    }

    if (u->embd) bk_fwd_embd_rows(u, ith, nth);
    else if (u->want_logits) bk_fwd_head(u, ith, nth);
}

void bk_llama_ubatch(const bk_ubatch *u, int ith, int nth) { llama_graph(u, 0, ith, nth); }

void bk_qwen3_ubatch(const bk_ubatch *u, int ith, int nth) { llama_graph(u, 1, ith, nth); }
