/* The Gemma 3 graph of one ubatch as llama.cpp b11192 builds it (src/models/gemma3.cpp, graph<iswa = true>;
 * src/llama-graph.cpp build_norm / build_ffn / build_attn) and its CPU backend computes it. Each op's float
 * order is in its kernel's header; the steps shared with llama are forward_common.h's.
 *
 * One ubatch of n tokens at positions p0 .. p0+n-1:
 *   x = GET_ROWS(token_embd, tokens) * sqrtf(n_embd)                      (ggml_scale: one rounding an element)
 *   for each layer l (swa: l % 6 < 5, the sliding-window layers with their own cache and RoPE base):
 *     h = RMS_NORM(x) * attn_norm;  q, k, v = wq h, wk h, wv h                     (norm.h, matmul.h)
 *     q = RMS_NORM(q) * attn_q_norm per head; ROPE_NEOX(q, p, base_l); q = q * f_attention_scale
 *     k = RMS_NORM(k) * attn_k_norm per head; ROPE_NEOX(k, p, base_l)
 *     K, V cells of this ubatch in the layer's cache <- k, v (F16 RNE)                  (kv.h)
 *     a = FLASH_ATTN_EXT(q, K, V, mask_l, 1.0), heads concatenated                       (attention.h)
 *     y = wo a  (all n columns: the node's n decides Q4_K's gemm / gemv split)
 *     [last layer: only the output rows go on (inp_out_ids GET_ROWS of y and x after build_attn)]
 *     x = RMS_NORM(y) * post_attention_norm + x
 *     h = RMS_NORM(x) * ffn_norm;  y = down(GEGLU(gate h, up h))                          (gelu.h)
 *     x = RMS_NORM(y) * post_ffw_norm + x
 *   logits = output (RMS_NORM(x) * output_norm)     (output = token_embd: the file has no output.weight)
 * RoPE NEOX rotates the pairs (i, i + n_rot/2) with the cos/sin of pair i (ggml-cpu/ops.cpp rotate_pairs with
 * n_offset n_dims/2: the same contraction as NORMAL, rope.h). The query scale is cfg->kq_scale
 * (f_attention_scale, src/models/gemma3.cpp: 1/sqrt(n_embd_head_k)); attention itself scales by 1.
 * F16 cache only (forward_common.c refuses a Q8_0 one for a model with a SWA cache).
 *
 * Several sequences in one ubatch (bk_fwd_decode_seqs: u->n_stream streams, each with its base and SWA caches):
 * the rows are those of the ubatch in stream order, each stream's K and V go into its own caches and its rows
 * attend over them with their masks (FLASH_ATTN_EXT with ne[3] = streams, bk_fwd_attention_streams); on the last
 * layer the output rows out_rows are gathered after wo (GET_ROWS of y and x), and the rest of the layer and the
 * head run over those n_out columns.
 */
#include "forward_common.h"

#include "attention.h"
#include "gelu.h"
#include "norm.h"
#include "repack.h"

#include <math.h>

/* out = W x for columns c0 .. c0+nc-1 (x column c at x + c*x_row, W->k floats), a MUL_MAT node of nc columns.
 * A repacked Q4_K matrix takes the node's activations in its own layout (a barrier between); else the site. */
static void mm_plain(const bk_ubatch *u, const bk_matrix *W, const float *x, int64_t x_row, int64_t c0, int nc,
                     float *out, int64_t out_col, int ith, int nth) {
    if (W->type == BK_TYPE_Q4_K && W->x8) {
        bk_fwd_state *st = u->st;
        bk_act_prepare_q4_K_8x8(x + c0 * x_row, x_row, nc, W->k, st->act_q4k, ith, nth);
#pragma omp barrier
        const int64_t r0 = bk_matmul_split(W->m, ith, nth), r1 = bk_matmul_split(W->m, ith + 1, nth);
        bk_matmul(W, st->act_q4k, bk_act_row_bytes_q8_K(W->k), nc, nc, r0, r1, out + c0 * out_col, out_col,
                  NULL, 0);
        return;
    }
    bk_fwd_site(u, &(const bk_site){
        .x = x, .x_row = x_row, .k = W->k, .c0 = c0, .nc = nc, .n_node = nc,
        .jobs = {{.W = W, .out = out, .out_col = out_col}}}, ith, nth);
}

/* x = RMS_NORM(y) * w + x for columns c0 .. c0+nc-1, by columns */
static void post_norm_add(const bk_ubatch *u, const float *w, int64_t c0, int nc, int ith, int nth) {
    const int E = u->cfg->n_embd;
    bk_fwd_state *st = u->st;
    for (int64_t t = c0 + ith; t < c0 + nc; t += nth) {
        float *y = st->y + t * E, *x = st->x + t * E;
        bk_rms_norm_mul_f32(E, y, w, u->cfg->rms_eps, y);
        for (int i = 0; i < E; i++) x[i] = y[i] + x[i];
    }
}

/* att = FLASH_ATTN_EXT(q, K, V, mask, 1.0) over layer l's cache (the SWA one for a sliding-window layer), one
 * stream: the F16 kernel, its split-KV path with a barrier between its two phases */
static void gemma3_attention(const bk_ubatch *u, int l, int swa, int ith, int nth) {
    const bk_model_config *cfg = u->cfg;
    bk_fwd_state *st = u->st;
    const int hd = cfg->head_dim;
    const int64_t nq = (int64_t)cfg->n_head * hd, nk = (int64_t)cfg->n_head_kv * hd;
    const bk_kv_cache *kv = swa ? u->kv_swa : u->kv;
    uint16_t *kc = (uint16_t *)bk_kv_cache_k(kv, l), *vc = (uint16_t *)bk_kv_cache_v(kv, l);
    const bk_attn_f16_args a = {
        .n_tokens = u->n, .n_head = cfg->n_head, .n_head_kv = cfg->n_head_kv, .dk = hd, .dv = hd,
        .n_kv = (int32_t)(swa ? u->n_kv_swa : u->n_kv), .scale = 1.0f, .oracle_nth = st->oracle_nth,
        .multi_stream = st->multi_stream,
        .q = st->q, .q_row = nq, .q_head = hd,
        .k = kc, .k_cell = nk, .k_head = hd,
        .v = vc, .v_cell = nk, .v_head = hd,
        .mask = swa ? st->mask_swa : st->mask, .mask_row = st->kv_max,
        .out = st->att, .out_row = nq, .out_head = hd,
        .scratch = st->attn_scratch,
    };
    bk_attn_f16(&a, ith, nth);
    if ((swa ? u->attn_path_swa : u->attn_path) == BK_ATTN_SPLIT_KV) {
#pragma omp barrier
        bk_attn_f16_reduce(&a, ith, nth);
    }
}

void bk_gemma3_ubatch(const bk_ubatch *u, int ith, int nth) {
    const bk_model_config *cfg = u->cfg;
    bk_fwd_state *st = u->st;
    const int E = cfg->n_embd, F = cfg->n_ff, n = u->n;
    const int64_t nq = (int64_t)cfg->n_head * cfg->head_dim;
    const float emb_scale = sqrtf((float)E), q_scale = cfg->kq_scale;

    bk_fwd_embed(u, ith, nth);
    for (int t = ith; t < n; t += nth) {  /* the rows this thread looked up */
        float *x = st->x + (int64_t)t * E;
        for (int i = 0; i < E; i++) x[i] = x[i] * emb_scale;
    }
#pragma omp barrier

    for (int l = 0; l < cfg->n_layer; l++) {
        const bk_layer *L = &u->w->layers[l];
        const int last = l == cfg->n_layer - 1, swa = L->swa && u->kv_swa;
        const bk_kv_cache *kv = swa ? u->kv_swa : u->kv;
        const uint32_t *idxs = swa ? st->idxs_swa : st->idxs;
        const float *rope = swa ? st->rope_swa : st->rope;
        /* the columns that go on after attention: all, or on the last layer the output rows only */
        const int64_t c0 = last ? u->out_c0 : 0;
        const int nc = last ? u->n_out : n;

        /* Q, K, V */
        bk_fwd_qkv_site(u, l, ith, nth);
#pragma omp barrier
        /* per-head norms, RoPE, the query scale, K and V into the layer's cells */
        bk_fwd_qk_norm_store(u, l, kv, idxs, rope, q_scale, ith, nth);
#pragma omp barrier
        /* attention over the layer's cache (each stream's own with several) */
        if (u->n_stream) bk_fwd_attention_streams(u, l, swa, 1.0f, ith, nth);
        else gemma3_attention(u, l, swa, ith, nth);
#pragma omp barrier
        if (last && !u->want_logits) break;

        /* output projection over the ubatch's n columns, then the post-norm and the residual */
        mm_plain(u, &L->wo, st->att, nq, 0, n, st->y, E, ith, nth);
#pragma omp barrier
        if (last && u->out_rows) {
            bk_fwd_gather_outputs(u, st->y, E, ith, nth);
#pragma omp barrier
        }
        post_norm_add(u, L->attn_post_norm, c0, nc, ith, nth);
#pragma omp barrier

        /* feed-forward: norm, gate and up, GEGLU, down, post-norm, residual */
        bk_fwd_site(u, &(const bk_site){
            .x = st->x, .x_row = E, .k = E, .norm = L->ffn_norm, .c0 = c0, .nc = nc, .n_node = nc,
            .jobs = {{.W = &L->gate, .out = st->gate, .out_col = F},
                     {.W = &L->up, .out = st->up, .out_col = F}}}, ith, nth);
#pragma omp barrier
        {
            const int64_t ga = bk_matmul_split(F, ith, nth), gb = bk_matmul_split(F, ith + 1, nth);
            if (gb > ga)
                for (int64_t t = c0; t < c0 + nc; t++)
                    bk_geglu_f32(gb - ga, st->h + t * F + ga, st->gate + t * F + ga, st->up + t * F + ga);
        }
#pragma omp barrier
        mm_plain(u, &L->down, st->h, F, c0, nc, st->y, E, ith, nth);
#pragma omp barrier
        post_norm_add(u, L->ffn_post_norm, c0, nc, ith, nth);
#pragma omp barrier
    }

    if (u->want_logits) bk_fwd_head(u, ith, nth);
}
