/* The llama forward pass, one OpenMP region per ubatch; the graph and its rules are in forward.h. */
#include "forward.h"

#include "act.h"
#include "attention.h"
#include "fp16.h"
#include "norm.h"
#include "quants.h"
#include "rope.h"
#include "rows8.h"

#include <omp.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 64
static size_t up64(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

/* ---------------------------------------------------------------- KV cache */

int bk_kv_cache_alloc(bk_kv_cache *kv, const bk_llama_config *cfg, uint32_t n_cells, int32_t kv_type) {
    memset(kv, 0, sizeof(*kv));
    const int64_t nk = (int64_t)cfg->n_head_kv * cfg->head_dim;
    if (n_cells == 0 || (kv_type != BK_TYPE_F16 && kv_type != BK_TYPE_Q8_0)) return BK_FWD_BAD_ARGS;
    if (kv_type == BK_TYPE_Q8_0 && nk % BK_QK) return BK_FWD_BAD_ARGS;
    kv->type = kv_type;
    kv->size = n_cells;
    kv->n_layer = cfg->n_layer;
    kv->k_row_bytes = kv_type == BK_TYPE_F16 ? (size_t)nk * 2 : (size_t)(nk / BK_QK) * sizeof(bk_block_q8_0);
    kv->v_row_bytes = kv->k_row_bytes;
    kv->pos_buf = (int32_t *)malloc(sizeof(int32_t) * n_cells);
    const size_t bytes = (size_t)cfg->n_layer * n_cells * (kv->k_row_bytes + kv->v_row_bytes);
    kv->data = (uint8_t *)calloc(bytes ? bytes : 1, 1);  /* llama.cpp clears its KV buffer at creation */
    if (!kv->pos_buf || !kv->data) {
        bk_kv_cache_free(kv);
        return BK_FWD_NO_MEMORY;
    }
    bk_kv_cells_init(&kv->cells, kv->pos_buf, n_cells, 0, BK_SWA_NONE);
    return BK_FWD_OK;
}

void bk_kv_cache_free(bk_kv_cache *kv) {
    free(kv->pos_buf);
    free(kv->data);
    kv->pos_buf = NULL;
    kv->data = NULL;
}

uint8_t *bk_kv_cache_k(const bk_kv_cache *kv, int layer) {
    return kv->data + (size_t)layer * kv->size * (kv->k_row_bytes + kv->v_row_bytes);
}

uint8_t *bk_kv_cache_v(const bk_kv_cache *kv, int layer) {
    return bk_kv_cache_k(kv, layer) + (size_t)kv->size * kv->k_row_bytes;
}

/* ---------------------------------------------------------------- run state */

static int act_slot(int32_t act_type) {
    switch (act_type) {
    case BK_TYPE_F16: return 1;
    case BK_TYPE_Q8_0: return 2;
    case BK_TYPE_Q8_1: return 3;
    default: return 0;
    }
}

static void need_act(const bk_matrix *m, int *needed) { needed[act_slot(bk_act_type(m->type))] = 1; }

int bk_llama_state_alloc(bk_llama_state *st, const bk_llama_config *cfg, const bk_llama_weights *w,
                         int32_t n_ubatch, uint32_t kv_max, int32_t nth, int32_t oracle_nth) {
    memset(st, 0, sizeof(*st));
    if (n_ubatch <= 0 || nth <= 0 || oracle_nth <= 0 || kv_max == 0) return BK_FWD_BAD_ARGS;
    st->n_ubatch = n_ubatch;
    st->kv_max = kv_max;
    st->nth = nth;
    st->oracle_nth = oracle_nth;
    st->theta_scale = bk_rope_theta_scale(cfg->rope_freq_base, cfg->n_rot);

    const size_t nu = (size_t)n_ubatch;
    const size_t nq = (size_t)cfg->n_head * cfg->head_dim, nkv = (size_t)cfg->n_head_kv * cfg->head_dim;
    size_t kmax = (size_t)cfg->n_embd;
    if (nq > kmax) kmax = nq;
    if ((size_t)cfg->n_ff > kmax) kmax = cfg->n_ff;

    int needed[4] = {0, 0, 0, 0}, needed_down[4] = {0, 0, 0, 0};
    need_act(&w->output, needed);
    for (int l = 0; l < cfg->n_layer; l++) {
        const bk_llama_layer *L = &w->layers[l];
        need_act(&L->wq, needed); need_act(&L->wk, needed); need_act(&L->wv, needed); need_act(&L->wo, needed);
        need_act(&L->gate, needed); need_act(&L->up, needed); need_act(&L->down, needed_down);
    }
    static const int32_t slot_type[4] = {BK_TYPE_F32, BK_TYPE_F16, BK_TYPE_Q8_0, BK_TYPE_Q8_1};

    const int max_threads = nth > oracle_nth ? nth : oracle_nth;
    const size_t attn_floats = bk_attn_f16_scratch_floats(cfg->n_head, cfg->head_dim, cfg->head_dim, oracle_nth,
                                                          max_threads);
    const size_t attn_q8 = cfg->head_dim % BK_QK ? 0
        : bk_attn_q8_0_scratch_floats(cfg->n_head, cfg->head_dim, cfg->head_dim, max_threads);

    size_t sizes[40];
    int ns = 0;
    sizes[ns++] = up64(nu * cfg->n_embd * 4);                       /* x */
    sizes[ns++] = up64(nu * kmax * 4);                              /* h */
    sizes[ns++] = up64(nu * nq * 4);                                /* q */
    sizes[ns++] = up64(nu * nkv * 4);                               /* k */
    sizes[ns++] = up64(nu * nkv * 4);                               /* v */
    sizes[ns++] = up64(nu * nq * 4);                                /* att */
    sizes[ns++] = up64(nu * cfg->n_ff * 4);                         /* gate */
    sizes[ns++] = up64(nu * cfg->n_ff * 4);                         /* up */
    sizes[ns++] = up64((size_t)cfg->n_vocab * 4);                   /* logits */
    sizes[ns++] = up64(nu * cfg->n_rot * 4);                        /* rope */
    for (int i = 0; i < 4; i++) {
        st->act_col[i] = up64(bk_act_row_bytes(slot_type[i], (int32_t)kmax));
        sizes[ns++] = needed[i] ? st->act_col[i] * nu : 0;
        sizes[ns++] = needed_down[i] ? st->act_col[i] * nu : 0;
        sizes[ns++] = needed[i] || needed_down[i] ? st->act_col[i] * 2 * (size_t)max_threads : 0;
    }
    st->scratch_floats = up64(kmax * 4) / 4;
    sizes[ns++] = st->scratch_floats * 4 * (size_t)max_threads;
    sizes[ns++] = up64(nu * kv_max * 2);                            /* mask */
    sizes[ns++] = up64(nu * 4);                                     /* idxs */
    sizes[ns++] = up64(nu * 4);                                     /* pos */
    sizes[ns++] = up64((attn_floats > attn_q8 ? attn_floats : attn_q8) * 4); /* attention scratch */
    size_t total = 0;
    for (int i = 0; i < ns; i++) total += sizes[i];
    void *block = NULL;
    if (posix_memalign(&block, ALIGN, total)) return BK_FWD_NO_MEMORY;
    memset(block, 0, total);
    st->block = block;
    uint8_t *p = (uint8_t *)block;
    int i = 0;
#define TAKE(field, T) do { st->field = (T)(void *)p; p += sizes[i++]; } while (0)
    TAKE(x, float *); TAKE(h, float *); TAKE(q, float *); TAKE(k, float *); TAKE(v, float *);
    TAKE(att, float *); TAKE(gate, float *); TAKE(up, float *); TAKE(logits, float *); TAKE(rope, float *);
    for (int a = 0; a < 4; a++) {
        st->act[a] = sizes[i] ? p : NULL;
        p += sizes[i++];
        st->act_down[a] = sizes[i] ? p : NULL;
        p += sizes[i++];
        st->act_priv[a] = sizes[i] ? p : NULL;
        p += sizes[i++];
    }
    TAKE(scratch, float *);
    TAKE(mask, uint16_t *); TAKE(idxs, uint32_t *); TAKE(pos, int32_t *); TAKE(attn_scratch, float *);
#undef TAKE
    return BK_FWD_OK;
}

void bk_llama_state_free(bk_llama_state *st) {
    free(st->block);
    st->block = NULL;
}

/* ---------------------------------------------------------------- regrouped weights */

static int pack_one(bk_matrix *m, int nth) {
    if ((m->type != BK_TYPE_Q4_1 && m->type != BK_TYPE_Q8_0) || m->m < 8 || m->x8) return BK_FWD_OK;
    const size_t bytes = bk_x8_bytes(m->type, m->m, m->k);
    void *p = NULL;
    if (posix_memalign(&p, ALIGN, bytes)) return BK_FWD_NO_MEMORY;
    const int64_t ng = m->m / 8;
#pragma omp parallel num_threads(nth)
    {
        const int ith = omp_get_thread_num(), n = omp_get_num_threads();
        bk_x8_pack(m->type, m->data, m->row_bytes, m->k, ng * ith / n, ng * (ith + 1) / n, p);
    }
    m->x8 = p;
    /* the file's pages of this matrix are no longer read: drop them from the resident set now, so that the peak
     * does not hold the file and the copy at once (a read-only file mapping: they come back if touched) */
    const uintptr_t pg = 4096, a = ((uintptr_t)m->data + pg - 1) & ~(pg - 1);
    const uintptr_t b = ((uintptr_t)m->data + (uintptr_t)m->m * m->row_bytes) & ~(pg - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
    return BK_FWD_OK;
}

int bk_llama_pack(bk_llama_weights *w, bk_llama_layer *layers, int n_layer, int nth) {
    int rc = pack_one(&w->output, nth);
    for (int l = 0; l < n_layer && rc == BK_FWD_OK; l++) {
        bk_matrix *ms[7] = {&layers[l].wq, &layers[l].wk, &layers[l].wv, &layers[l].wo, &layers[l].gate,
                            &layers[l].up, &layers[l].down};
        for (int i = 0; i < 7 && rc == BK_FWD_OK; i++) rc = pack_one(ms[i], nth);
    }
    return rc;
}

void bk_llama_unpack(bk_llama_weights *w, bk_llama_layer *layers, int n_layer) {
    free((void *)w->output.x8);
    w->output.x8 = NULL;
    for (int l = 0; l < n_layer; l++) {
        bk_matrix *ms[7] = {&layers[l].wq, &layers[l].wk, &layers[l].wv, &layers[l].wo, &layers[l].gate,
                            &layers[l].up, &layers[l].down};
        for (int i = 0; i < 7; i++) {
            free((void *)ms[i]->x8);
            ms[i]->x8 = NULL;
        }
    }
}

/* ---------------------------------------------------------------- pieces of the graph */

/* GET_ROWS: one embedding row as float (ggml-base's to_float for the type: exact) */
static void get_row(const bk_matrix *E, int32_t token, float *y) {
    const uint8_t *row = (const uint8_t *)E->data + (size_t)token * E->row_bytes;
    switch (E->type) {
    case BK_TYPE_F16: bk_fp16_to_fp32_row((const uint16_t *)row, y, E->k); break;
    case BK_TYPE_Q8_0: bk_dequant_row_q8_0(row, y, E->k); break;
    case BK_TYPE_Q4_1: bk_dequant_row_q4_1(row, y, E->k); break;
    default: memcpy(y, row, (size_t)E->k * sizeof(float)); break;
    }
}

/* Where the activation columns of a matmul site live: one base per activation type (the column c0 computed
 * first is at base, column c0+i at base + i*col) */
typedef struct {
    uint8_t *base[4];
    size_t col[4];
} act_view;

/* A site with at most PRIV columns prepares its activations in every thread, into the thread's own buffer: no
 * barrier between the norm (or attention) and the matmul. More columns: each thread prepares its share into
 * the shared buffer, then a barrier. */
#define PRIV 2

/* a view over one of the state's activation buffer sets, starting at column `first` */
static act_view view_of(const bk_llama_state *st, uint8_t *const bufs[4], size_t first) {
    act_view v;
    for (int s = 0; s < 4; s++) {
        v.col[s] = st->act_col[s];
        v.base[s] = bufs[s] ? bufs[s] + first * st->act_col[s] : NULL;
    }
    return v;
}

static act_view shared_view(const bk_llama_state *st, int64_t c0) { return view_of(st, st->act, (size_t)c0); }
static act_view down_view(const bk_llama_state *st, int64_t c0) { return view_of(st, st->act_down, (size_t)c0); }
static act_view private_view(const bk_llama_state *st, int ith) {
    return view_of(st, st->act_priv, (size_t)ith * PRIV);
}

/* Column i of a view for every activation type the given matrices take (each type once), from x[k]. */
static void prep_col(const act_view *v, const bk_matrix *const *ms, int nm, const float *x, int32_t k, int64_t i) {
    int done[4] = {0, 0, 0, 0};
    for (int j = 0; j < nm; j++) {
        const int32_t t = bk_act_type(ms[j]->type);
        const int s = act_slot(t);
        if (done[s]) continue;
        done[s] = 1;
        bk_act_prepare(t, x, k, v->base[s] + (size_t)i * v->col[s]);
    }
}

typedef struct {
    const bk_matrix *W;
    float *out;          /* the outputs of column 0 (column c at out + c*out_col) */
    int64_t out_col;
    const float *res;    /* NULL or the residual, laid out like out */
} mm_job;

/* The rows of each job split over the threads (bk_matmul_split); columns c0 .. c0+nc-1, their activations in v
 * (column c0 at the base); n_node decides the kernels. */
static void run_jobs(const act_view *v, const mm_job *jobs, int nj, int64_t c0, int nc, int n_node, int ith,
                     int nth) {
    for (int j = 0; j < nj; j++) {
        const mm_job *J = &jobs[j];
        const int64_t r0 = bk_matmul_split(J->W->m, ith, nth), r1 = bk_matmul_split(J->W->m, ith + 1, nth);
        if (r0 < r1) {
            const int s = act_slot(bk_act_type(J->W->type));
            bk_matmul(J->W, v->base[s], v->col[s], nc, n_node, r0, r1, J->out + c0 * J->out_col, J->out_col,
                      J->res ? J->res + c0 * J->out_col : NULL, J->out_col);
        }
    }
}

/* The activations of columns c0 .. c0+nc-1 of x (rows x_row floats apart) for the matrices ms: RMS norm first
 * when w_norm is given. Few columns: every thread, privately (returns the private view); else each thread its
 * share into the shared buffer, then a barrier (returns the shared view). scratch: this thread's float[k]. */
static act_view prep_site(const bk_llama_state *st, const bk_matrix *const *ms, int nm, const float *x,
                          int64_t x_row, int32_t k, const float *w_norm, float eps, int64_t c0, int nc,
                          float *h_shared, float *scratch, int rotate64, int ith, int nth) {
    if (nc <= PRIV) {
        const act_view v = private_view(st, ith);
        for (int i = 0; i < nc; i++) {
            const float *src = x + (c0 + i) * x_row;
            if (w_norm) {
                bk_rms_norm_mul_f32(k, src, w_norm, eps, scratch);
                src = scratch;
            } else if (rotate64) {
                memcpy(scratch, src, (size_t)k * sizeof(float));
                bk_hadamard_rows(scratch, k / 64, 64, 64, 0, 1);
                src = scratch;
            }
            prep_col(&v, ms, nm, src, k, i);
        }
        return v;
    }
    const act_view v = shared_view(st, c0);
    for (int64_t i = ith; i < nc; i += nth) {
        float *src = (float *)x + (c0 + i) * x_row;
        if (w_norm) {
            float *h = h_shared + (c0 + i) * x_row;
            bk_rms_norm_mul_f32(k, src, w_norm, eps, h);
            src = h;
        } else if (rotate64) {
            bk_hadamard_rows(src, k / 64, 64, 64, 0, 1);  /* in place: the row is this thread's alone */
        }
        prep_col(&v, ms, nm, src, k, i);
    }
#pragma omp barrier
    return v;
}

/* RoPE of the elements r0 <= r < r1 of a row of heads of hd values (pairs never straddle r0, r1: both even) */
static void rope_range(float *x, int64_t r0, int64_t r1, int hd, int n_rot, const float *cache) {
    for (int64_t r = r0; r < r1; r += 2) {
        const int i = (int)(r % hd);
        if (i >= n_rot) continue;
        const float c = cache[i], s = cache[i + 1];
        const float x0 = x[r], x1 = x[r + 1];
        x[r] = fmaf(x0, c, -(x1 * s));
        x[r + 1] = fmaf(x0, s, x1 * c);
    }
}

/* ---------------------------------------------------------------- one ubatch */

static void ubatch_region(const bk_llama_config *cfg, const bk_llama_weights *w, bk_kv_cache *kv,
                          bk_llama_state *st, const int32_t *tokens, int n, uint32_t n_kv, int want_logits, int ith,
                          int nth) {
    const int E = cfg->n_embd, hd = cfg->head_dim, F = cfg->n_ff;
    const int64_t nq = (int64_t)cfg->n_head * hd, nk = (int64_t)cfg->n_head_kv * hd;
    const int q8 = kv->type == BK_TYPE_Q8_0;
    const int rot_k = q8 ? bk_attn_rot_k_size(hd) : 0;
    const int attn_path = bk_attn_f16_path_streams(n, (int32_t)n_kv, hd, st->multi_stream);
    float *scratch = st->scratch + (size_t)ith * st->scratch_floats;

    bk_kv_mask_f16(&kv->cells, st->pos, (uint32_t)n, n_kv, st->mask, st->kv_max, ith, nth);
    for (int t = ith; t < n; t += nth) {
        get_row(&w->tok_embd, tokens[t], st->x + (int64_t)t * E);
        bk_rope_cache(st->pos[t], cfg->n_rot, st->theta_scale, st->rope + (int64_t)t * cfg->n_rot);
    }
#pragma omp barrier

    for (int l = 0; l < cfg->n_layer; l++) {
        const bk_llama_layer *L = &w->layers[l];
        const int last = l == cfg->n_layer - 1;
        /* the columns that go on after attention: all, or on the last layer the output row only */
        const int64_t c0 = last ? n - 1 : 0;
        const int nc = last ? 1 : n;

        /* attention norm, Q, K, V; with an F16 cache each thread ropes and stores the rows it computed */
        {
            const bk_matrix *ms[3] = {&L->wq, &L->wk, &L->wv};
            const act_view v = prep_site(st, ms, 3, st->x, E, E, L->attn_norm, cfg->rms_eps, 0, n, st->h, scratch, 0,
                                         ith, nth);
            const mm_job jobs[3] = {{&L->wq, st->q, nq, NULL}, {&L->wk, st->k, nk, NULL}, {&L->wv, st->v, nk, NULL}};
            run_jobs(&v, jobs, 3, 0, n, n, ith, nth);
            if (!q8) {
                const int64_t aq = bk_matmul_split(nq, ith, nth), bq = bk_matmul_split(nq, ith + 1, nth);
                const int64_t ak = bk_matmul_split(nk, ith, nth), bk = bk_matmul_split(nk, ith + 1, nth);
                uint16_t *kc = (uint16_t *)bk_kv_cache_k(kv, l), *vc = (uint16_t *)bk_kv_cache_v(kv, l);
                for (int t = 0; t < n; t++) {
                    const float *rc = st->rope + (int64_t)t * cfg->n_rot;
                    rope_range(st->q + t * nq, aq, bq, hd, cfg->n_rot, rc);
                    rope_range(st->k + t * nk, ak, bk, hd, cfg->n_rot, rc);
                }
                if (bk > ak) {
                    bk_kv_store_f16(st->k + ak, nk, (uint32_t)n, (uint32_t)(bk - ak), st->idxs, kc + ak, nk, 0, 1);
                    bk_kv_store_f16(st->v + ak, nk, (uint32_t)n, (uint32_t)(bk - ak), st->idxs, vc + ak, nk, 0, 1);
                }
            }
        }
#pragma omp barrier
        if (q8) {
            /* RoPE, rotation and the Q8_0 store need whole rows: by tokens */
            for (int t = ith; t < n; t += nth) {
                float *q = st->q + t * nq, *k = st->k + t * nk, *v = st->v + t * nk;
                const float *rc = st->rope + (int64_t)t * cfg->n_rot;
                bk_rope_normal(q, cfg->n_head, hd, cfg->n_rot, rc);
                bk_rope_normal(k, cfg->n_head_kv, hd, cfg->n_rot, rc);
                if (rot_k) {
                    bk_hadamard_rows(q, nq / rot_k, rot_k, rot_k, 0, 1);
                    bk_hadamard_rows(k, nk / rot_k, rot_k, rot_k, 0, 1);
                    bk_hadamard_rows(v, nk / 64, 64, 64, 0, 1);
                }
                bk_kv_store_q8_0(k, nk, 1, (uint32_t)nk, st->idxs + t, bk_kv_cache_k(kv, l),
                                 (int64_t)kv->k_row_bytes, 0, 1);
                bk_kv_store_q8_0(v, nk, 1, (uint32_t)nk, st->idxs + t, bk_kv_cache_v(kv, l),
                                 (int64_t)kv->v_row_bytes, 0, 1);
            }
#pragma omp barrier
            bk_attn_q8_0_args a;
            memset(&a, 0, sizeof(a));
            a.n_tokens = n; a.n_head = cfg->n_head; a.n_head_kv = cfg->n_head_kv; a.dk = hd; a.dv = hd;
            a.n_kv = (int32_t)n_kv; a.scale = cfg->kq_scale;
            a.q = st->q; a.q_row = nq; a.q_head = hd;
            a.k = bk_kv_cache_k(kv, l); a.k_cell = (int64_t)kv->k_row_bytes; a.k_head = hd / BK_QK * 34;
            a.v = bk_kv_cache_v(kv, l); a.v_cell = (int64_t)kv->v_row_bytes; a.v_head = hd / BK_QK * 34;
            a.mask = st->mask; a.mask_row = st->kv_max;
            a.out = st->att; a.out_row = nq; a.out_head = hd;
            a.scratch = st->attn_scratch;
            bk_attn_q8_0(&a, ith, nth);
        } else {
            bk_attn_f16_args a;
            memset(&a, 0, sizeof(a));
            a.n_tokens = n; a.n_head = cfg->n_head; a.n_head_kv = cfg->n_head_kv; a.dk = hd; a.dv = hd;
            a.n_kv = (int32_t)n_kv; a.scale = cfg->kq_scale; a.oracle_nth = st->oracle_nth;
            a.multi_stream = st->multi_stream;
            a.q = st->q; a.q_row = nq; a.q_head = hd;
            a.k = (const uint16_t *)bk_kv_cache_k(kv, l); a.k_cell = nk; a.k_head = hd;
            a.v = (const uint16_t *)bk_kv_cache_v(kv, l); a.v_cell = nk; a.v_head = hd;
            a.mask = st->mask; a.mask_row = st->kv_max;
            a.out = st->att; a.out_row = nq; a.out_head = hd;
            a.scratch = st->attn_scratch;
            bk_attn_f16(&a, ith, nth);
            if (attn_path == BK_ATTN_SPLIT_KV) {
#pragma omp barrier
                bk_attn_f16_reduce(&a, ith, nth);
            }
        }
#pragma omp barrier
        if (last && !want_logits) break;  /* no output row: the last layer ends with its K and V */
        {
            const bk_matrix *ms[1] = {&L->wo};
            const act_view v = prep_site(st, ms, 1, st->att, nq, (int32_t)nq, NULL, 0.0f, c0, nc, NULL, scratch,
                                         q8 && rot_k, ith, nth);
            const mm_job jobs[1] = {{&L->wo, st->x, E, st->x}};
            run_jobs(&v, jobs, 1, c0, nc, n, ith, nth);  /* wo runs over the ubatch's n columns in ggml */
        }
#pragma omp barrier
        {
            /* FFN norm, gate and up; each thread applies SwiGLU to the rows it computed and prepares them for
             * down (its rows start at a multiple of 32: whole quantization blocks) */
            const bk_matrix *ms[2] = {&L->gate, &L->up};
            const act_view v = prep_site(st, ms, 2, st->x, E, E, L->ffn_norm, cfg->rms_eps, c0, nc, st->h, scratch, 0,
                                         ith, nth);
            const mm_job jobs[2] = {{&L->gate, st->gate, F, NULL}, {&L->up, st->up, F, NULL}};
            run_jobs(&v, jobs, 2, c0, nc, nc, ith, nth);
            const int64_t a = bk_matmul_split(F, ith, nth), b = bk_matmul_split(F, ith + 1, nth);
            const int32_t dt = bk_act_type(L->down.type);
            const act_view d = down_view(st, c0);
            const int ds = act_slot(dt);
            for (int i = 0; i < nc; i++) {
                const int64_t t = c0 + i;
                float *h = st->h + t * F;
                if (b > a) {
                    bk_swiglu_f32(b - a, h + a, st->gate + t * F + a, st->up + t * F + a);
                    bk_act_prepare(dt, h + a, (int32_t)(b - a),
                                   d.base[ds] + (size_t)i * d.col[ds] + bk_act_row_bytes(dt, (int32_t)a));
                }
            }
        }
#pragma omp barrier
        {
            const act_view d = down_view(st, c0);
            const mm_job jobs[1] = {{&L->down, st->x, E, st->x}};
            run_jobs(&d, jobs, 1, c0, nc, nc, ith, nth);
        }
#pragma omp barrier
    }

    if (!want_logits) return;
    {
        const int64_t t = n - 1;
        const bk_matrix *ms[1] = {&w->output};
        const act_view v = prep_site(st, ms, 1, st->x, E, E, w->output_norm, cfg->rms_eps, t, 1, st->h, scratch, 0,
                                     ith, nth);
        const int s = act_slot(bk_act_type(w->output.type));
        const int64_t a = bk_matmul_split(w->output.m, ith, nth), b = bk_matmul_split(w->output.m, ith + 1, nth);
        bk_matmul(&w->output, v.base[s], v.col[s], 1, 1, a, b, st->logits, cfg->n_vocab, NULL, 0);
    }
}

int bk_llama_decode(const bk_llama_config *cfg, const bk_llama_weights *w, bk_kv_cache *kv, bk_llama_state *st,
                    const int32_t *tokens, int32_t n, int32_t pos0) {
    if (n <= 0 || pos0 < 0 || kv->size > st->kv_max) return BK_FWD_BAD_ARGS;
    if ((int64_t)pos0 + n > (int64_t)kv->size) return BK_FWD_CACHE_FULL;
    for (int32_t u0 = 0; u0 < n; u0 += st->n_ubatch) {
        const int nu = n - u0 < st->n_ubatch ? n - u0 : st->n_ubatch;
        for (int t = 0; t < nu; t++) st->pos[t] = pos0 + u0 + t;
        if (bk_kv_find_slot(&kv->cells, st->pos, (uint32_t)nu, st->idxs) != 0) return BK_FWD_CACHE_FULL;
        bk_kv_apply_ubatch(&kv->cells, st->idxs, st->pos, (uint32_t)nu);
        const uint32_t n_kv = bk_kv_n_kv(&kv->cells);
        const int want_logits = u0 + nu == n;
        const int32_t *tok = tokens + u0;
#pragma omp parallel num_threads(st->nth)
        ubatch_region(cfg, w, kv, st, tok, nu, n_kv, want_logits, omp_get_thread_num(), omp_get_num_threads());
    }
    return BK_FWD_OK;
}
