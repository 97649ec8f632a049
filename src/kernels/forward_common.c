/* The steps every architecture's graph shares, allocation, weight regrouping and the decode driver
 * (forward_common.h, forward.h). */
#include "forward_common.h"

#include "act.h"
#include "attention.h"
#include "fp16.h"
#include "norm.h"
#include "kquants.h"
#include "kquants_q5k.h"
#include "quants.h"
#include "quants_iq4.h"
#include "quants_tq.h"
#include "repack.h"
#include "rope.h"
#include "rows8.h"

#include <math.h>
#include <omp.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 64
static size_t up64(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

/* ---------------------------------------------------------------- architectures */

static const char *const arch_names[BK_ARCH_COUNT] = {
#define BK_ARCH(id, name, graph) [id] = name,
#include "forward_archs.h"
#undef BK_ARCH
};

static const bk_ubatch_graph arch_graphs[BK_ARCH_COUNT] = {
#define BK_ARCH(id, name, graph) [id] = graph,
#include "forward_archs.h"
#undef BK_ARCH
};

int bk_arch_from_name(const char *name) {
    for (int a = 0; a < BK_ARCH_COUNT; a++)
        if (!strcmp(name, arch_names[a])) return a;
    return -1;
}

const char *bk_arch_name(int arch) { return arch >= 0 && arch < BK_ARCH_COUNT ? arch_names[arch] : NULL; }

/* ---------------------------------------------------------------- KV cache */

int bk_kv_cache_alloc(bk_kv_cache *kv, const bk_model_config *cfg, uint32_t n_cells, int32_t kv_type,
                      uint32_t n_swa, int32_t swa_type) {
    memset(kv, 0, sizeof(*kv));
    const int64_t nk = (int64_t)cfg->n_head_kv * cfg->head_dim;
    if (n_cells == 0 || (kv_type != BK_TYPE_F16 && kv_type != BK_TYPE_Q8_0)) return BK_FWD_BAD_ARGS;
    if (kv_type == BK_TYPE_Q8_0 && nk % BK_QK) return BK_FWD_BAD_ARGS;
    if (swa_type < BK_SWA_NONE || swa_type > BK_SWA_SYMMETRIC || (swa_type == BK_SWA_NONE) != (n_swa == 0))
        return BK_FWD_BAD_ARGS;
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
    bk_kv_cells_init(&kv->cells, kv->pos_buf, n_cells, n_swa, swa_type);
    return BK_FWD_OK;
}

int bk_kv_cache_alloc_swa(bk_kv_cache *kv, const bk_model_config *cfg, int32_t n_ubatch, int32_t n_seq) {
    if (cfg->n_swa == 0 || kv->swa || n_ubatch <= 0 || n_seq <= 0) return BK_FWD_BAD_ARGS;
    /* src/llama-kv-cache-iswa.cpp:73 (b11192): GGML_PAD(min(size_base, n_swa * n_seq + n_ubatch), 256), n_seq the
     * sequences of one stream (n_seq_max with a unified cache, else 1) */
    uint64_t want = (uint64_t)cfg->n_swa * (uint64_t)n_seq + (uint64_t)n_ubatch;
    if (want > kv->size) want = kv->size;
    const uint32_t n = (uint32_t)((want + BK_KV_PAD - 1) / BK_KV_PAD * BK_KV_PAD);
    bk_kv_cache *s = (bk_kv_cache *)calloc(1, sizeof(bk_kv_cache));
    if (!s) return BK_FWD_NO_MEMORY;
    const int rc = bk_kv_cache_alloc(s, cfg, n, kv->type, cfg->n_swa, cfg->swa_type);
    if (rc != BK_FWD_OK) {
        free(s);
        return rc;
    }
    kv->swa = s;
    return BK_FWD_OK;
}

void bk_kv_cache_free(bk_kv_cache *kv) {
    if (kv->swa) {
        bk_kv_cache_free(kv->swa);
        free(kv->swa);
        kv->swa = NULL;
    }
    free(kv->pos_buf);
    free(kv->data);
    free(kv->cells.seq);
    kv->cells.seq = NULL;
    kv->pos_buf = NULL;
    kv->data = NULL;
}

int bk_kv_cache_make_unified(bk_kv_cache *kv) {
    if (!kv->pos_buf || kv->cells.seq || (kv->swa && (!kv->swa->pos_buf || kv->swa->cells.seq)))
        return BK_FWD_BAD_ARGS;
    kv->cells.seq = (int32_t *)malloc(sizeof(int32_t) * kv->size);
    if (!kv->cells.seq) return BK_FWD_NO_MEMORY;
    bk_kv_cells_clear(&kv->cells);
    if (kv->swa) {  /* llama_kv_cache_iswa: both caches unified */
        kv->swa->cells.seq = (int32_t *)malloc(sizeof(int32_t) * kv->swa->size);
        if (!kv->swa->cells.seq) return BK_FWD_NO_MEMORY;   /* bk_kv_cache_free frees the base's */
        bk_kv_cells_clear(&kv->swa->cells);
    }
    return BK_FWD_OK;
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
    case BK_TYPE_Q8_K: return BK_ACT_Q8_K;
    case BK_TYPE_F16: return BK_ACT_F16;
    case BK_TYPE_BF16: return BK_ACT_BF16;
    case BK_TYPE_Q8_0: return BK_ACT_Q8_0;
    case BK_TYPE_Q8_1: return BK_ACT_Q8_1;
    default: return BK_ACT_F32;
    }
}

static const int32_t slot_type[BK_ACT_SLOTS] = {
    [BK_ACT_F32] = BK_TYPE_F32, [BK_ACT_F16] = BK_TYPE_F16, [BK_ACT_Q8_0] = BK_TYPE_Q8_0, [BK_ACT_Q8_1] = BK_TYPE_Q8_1,
    [BK_ACT_Q8_K] = BK_TYPE_Q8_K, [BK_ACT_BF16] = BK_TYPE_BF16,
};

/* The matrices of a layer, down last (its input has buffers of its own). */
#define LAYER_MATS 7
static void layer_mats(bk_layer *L, bk_matrix *ms[LAYER_MATS]) {
    ms[0] = &L->wq; ms[1] = &L->wk; ms[2] = &L->wv; ms[3] = &L->wo;
    ms[4] = &L->gate; ms[5] = &L->up; ms[6] = &L->down;
}

static void need_act(const bk_matrix *m, int *needed) { needed[act_slot(bk_act_type(m->type))] = 1; }

int bk_fwd_state_alloc(bk_fwd_state *st, const bk_model_config *cfg, const bk_model_weights *w,
                       int32_t n_ubatch, uint32_t kv_max, int32_t nth, int32_t oracle_nth) {
    memset(st, 0, sizeof(*st));
    if (n_ubatch <= 0 || nth <= 0 || oracle_nth <= 0 || kv_max == 0) return BK_FWD_BAD_ARGS;
    st->n_ubatch = n_ubatch;
    st->kv_max = kv_max;
    st->nth = nth;
    st->oracle_nth = oracle_nth;
    st->theta_scale = bk_rope_theta_scale(cfg->rope_freq_base, cfg->n_rot);
    const int swa = cfg->n_swa > 0;
    if (swa)
        st->theta_scale_swa = bk_rope_theta_scale(cfg->rope_freq_base_swa > 0 ? cfg->rope_freq_base_swa
                                                                              : cfg->rope_freq_base, cfg->n_rot);

    const size_t nu = (size_t)n_ubatch;
    const size_t nq = (size_t)cfg->n_head * cfg->head_dim, nkv = (size_t)cfg->n_head_kv * cfg->head_dim;
    size_t kmax = (size_t)cfg->n_embd;
    if (nq > kmax) kmax = nq;
    if ((size_t)cfg->n_ff > kmax) kmax = cfg->n_ff;

    int needed[BK_ACT_SLOTS] = {0}, needed_down[BK_ACT_SLOTS] = {0};
    need_act(&w->output, needed);
    for (int l = 0; l < cfg->n_layer; l++) {
        bk_matrix *ms[LAYER_MATS];
        layer_mats((bk_layer *)&w->layers[l], ms);
        for (int i = 0; i < LAYER_MATS; i++) need_act(ms[i], i == LAYER_MATS - 1 ? needed_down : needed);
    }

    const int max_threads = nth > oracle_nth ? nth : oracle_nth;
    const size_t attn_floats = bk_attn_f16_scratch_floats(cfg->n_head, cfg->head_dim, cfg->head_dim, oracle_nth,
                                                          max_threads);
    const size_t attn_q8 = cfg->head_dim % BK_QK ? 0
        : bk_attn_q8_0_scratch_floats(cfg->n_head, cfg->head_dim, cfg->head_dim, max_threads);

    size_t sizes[48];
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
    for (int s = 0; s < BK_ACT_SLOTS; s++) {
        st->act_col[s] = up64(bk_act_row_bytes(slot_type[s], (int32_t)kmax));
        sizes[ns++] = needed[s] ? st->act_col[s] * nu : 0;
        sizes[ns++] = needed_down[s] ? st->act_col[s] * nu : 0;
        sizes[ns++] = needed[s] || needed_down[s] ? st->act_col[s] * 2 * (size_t)max_threads : 0;
    }
    st->scratch_floats = up64(kmax * 4) / 4;
    sizes[ns++] = st->scratch_floats * 4 * (size_t)max_threads;
    sizes[ns++] = up64(nu * kv_max * 2);                            /* mask */
    sizes[ns++] = up64(nu * 4);                                     /* idxs */
    sizes[ns++] = up64(nu * 4);                                     /* pos */
    sizes[ns++] = up64((attn_floats > attn_q8 ? attn_floats : attn_q8) * 4); /* attention scratch */
    /* y: gemma3's product before its post-norm; the repacked Q4_K products with a residual (llama) */
    sizes[ns++] = swa || kmax % BK_QK_K == 0 ? up64(nu * cfg->n_embd * 4) : 0;  /* y */
    sizes[ns++] = swa ? up64(nu * cfg->n_rot * 4) : 0;              /* rope_swa */
    sizes[ns++] = swa ? up64(nu * kv_max * 2) : 0;                  /* mask_swa */
    sizes[ns++] = swa ? up64(nu * 4) : 0;                           /* idxs_swa */
    sizes[ns++] = kmax % BK_QK_K == 0 ? up64(nu * bk_act_row_bytes_q8_K((int32_t)kmax)) : 0; /* act_q4k */
    size_t total = 0;
    for (int i = 0; i < ns; i++) total += sizes[i];
    void *block = NULL;
    if (posix_memalign(&block, ALIGN, total)) return BK_FWD_NO_MEMORY;
    memset(block, 0, total);
    st->block = block;
    uint8_t *p = (uint8_t *)block;
    int i = 0;
#define TAKE(field, T) do { st->field = (T)(void *)p; p += sizes[i++]; } while (0)
#define TAKE_OR_NULL(field) do { st->field = sizes[i] ? (void *)p : NULL; p += sizes[i++]; } while (0)
    TAKE(x, float *); TAKE(h, float *); TAKE(q, float *); TAKE(k, float *); TAKE(v, float *);
    TAKE(att, float *); TAKE(gate, float *); TAKE(up, float *); TAKE(logits, float *); TAKE(rope, float *);
    for (int s = 0; s < BK_ACT_SLOTS; s++) {
        TAKE_OR_NULL(act[s]);
        TAKE_OR_NULL(act_down[s]);
        TAKE_OR_NULL(act_priv[s]);
    }
    TAKE(scratch, float *);
    TAKE(mask, uint16_t *); TAKE(idxs, uint32_t *); TAKE(pos, int32_t *); TAKE(attn_scratch, float *);
    TAKE_OR_NULL(y); TAKE_OR_NULL(rope_swa); TAKE_OR_NULL(mask_swa); TAKE_OR_NULL(idxs_swa); TAKE_OR_NULL(act_q4k);
#undef TAKE_OR_NULL
#undef TAKE
    return BK_FWD_OK;
}

void bk_fwd_state_free(bk_fwd_state *st) {
    free(st->block);
    st->block = NULL;
}

/* ---------------------------------------------------------------- regrouped weights */

static int pack_one(bk_matrix *m, int nth) {
    if (m->type == BK_TYPE_Q4_K || m->type == BK_TYPE_Q4_0 || m->type == BK_TYPE_IQ4_NL) {
        /* llama-server's CPU_REPACK buffer (docs/kquants.md): q4_K_8x8 / q4_0_8x8 when the rows are a multiple
         * of 8 (a tied Q4_0 head's MUL_MAT copy too: the output matrix, not the embedding) */
        const int q40 = m->type == BK_TYPE_Q4_0, nl = m->type == BK_TYPE_IQ4_NL;  /* iq4_nl_8x8: Q4_0's shapes */
        if (m->x8 || !(q40 || nl ? bk_repack_q4_0_takes(m->m, m->k) : bk_repack_q4_K_takes(m->m, m->k)))
            return BK_FWD_OK;
        void *p = NULL;
        if (posix_memalign(&p, ALIGN, (size_t)m->m * m->row_bytes)) return BK_FWD_NO_MEMORY;
#pragma omp parallel num_threads(nth)
        {
            if (q40) bk_repack_q4_0_8x8(m->data, p, m->m, m->k, omp_get_thread_num(), omp_get_num_threads());
            else if (nl) bk_repack_iq4_nl_8x8(m->data, p, m->m, m->k, omp_get_thread_num(), omp_get_num_threads());
            else bk_repack_q4_K_8x8(m->data, p, m->m, m->k, omp_get_thread_num(), omp_get_num_threads());
        }
        m->x8 = p;
        return BK_FWD_OK;
    }
    if ((m->type != BK_TYPE_Q4_1 && m->type != BK_TYPE_Q8_0) || m->m < 8 || m->x8) return BK_FWD_OK;
    const size_t bytes = bk_x8_bytes(m->type, m->m, m->k);
    void *p = NULL;
    if (posix_memalign(&p, ALIGN, bytes)) return BK_FWD_NO_MEMORY;
    /* packed in chunks of PACK_CHUNK_GROUPS groups of 8 rows; after each chunk the file's pages it read are
     * dropped from the resident set, so that the peak never holds a large matrix twice (the file's pages and the
     * copy: Gemma 3's tied 262,144-row head is 167 MB). A read-only file mapping: a dropped page comes back if
     * touched. The packed bytes do not depend on the cut. */
    enum { PACK_CHUNK_GROUPS = 1024 };
    const int64_t ng = m->m / 8;
    const uintptr_t pg = 4096;
    uintptr_t dropped = ((uintptr_t)m->data + pg - 1) & ~(pg - 1);
    for (int64_t g0 = 0; g0 < ng; g0 += PACK_CHUNK_GROUPS) {
        const int64_t g1 = g0 + PACK_CHUNK_GROUPS < ng ? g0 + PACK_CHUNK_GROUPS : ng;
#pragma omp parallel num_threads(nth)
        {
            const int ith = omp_get_thread_num(), n = omp_get_num_threads();
            bk_x8_pack(m->type, m->data, m->row_bytes, m->k, g0 + (g1 - g0) * ith / n, g0 + (g1 - g0) * (ith + 1) / n,
                       p);
        }
        const int64_t rows_read = g1 == ng ? m->m : g1 * 8;
        const uintptr_t b = ((uintptr_t)m->data + (uintptr_t)rows_read * m->row_bytes) & ~(pg - 1);
        if (b > dropped) {
            madvise((void *)dropped, b - dropped, MADV_DONTNEED);
            dropped = b;
        }
    }
    m->x8 = p;
    return BK_FWD_OK;
}

static void unpack_one(bk_matrix *m) {
    free((void *)m->x8);
    m->x8 = NULL;
}

int bk_fwd_pack(bk_model_weights *w, bk_layer *layers, int n_layer, int nth) {
    int rc = pack_one(&w->output, nth);
    for (int l = 0; l < n_layer && rc == BK_FWD_OK; l++) {
        bk_matrix *ms[LAYER_MATS];
        layer_mats(&layers[l], ms);
        for (int i = 0; i < LAYER_MATS && rc == BK_FWD_OK; i++) rc = pack_one(ms[i], nth);
    }
    return rc;
}

void bk_fwd_unpack(bk_model_weights *w, bk_layer *layers, int n_layer) {
    unpack_one(&w->output);
    for (int l = 0; l < n_layer; l++) {
        bk_matrix *ms[LAYER_MATS];
        layer_mats(&layers[l], ms);
        for (int i = 0; i < LAYER_MATS; i++) unpack_one(ms[i]);
    }
}

/* ---------------------------------------------------------------- activations */

/* GET_ROWS: one embedding row as float (ggml-base's to_float for the type: exact) */
static void get_row(const bk_matrix *E, int32_t token, float *y) {
    const uint8_t *row = (const uint8_t *)E->data + (size_t)token * E->row_bytes;
    switch (E->type) {
    case BK_TYPE_F16: bk_fp16_to_fp32_row((const uint16_t *)row, y, E->k); break;
    case BK_TYPE_BF16: bk_bf16_to_fp32_row((const uint16_t *)row, y, E->k); break;
    case BK_TYPE_Q8_0: bk_dequant_row_q8_0(row, y, E->k); break;
    case BK_TYPE_Q4_0: bk_dequant_row_q4_0(row, y, E->k); break;
    case BK_TYPE_IQ4_NL: bk_dequant_row_iq4_nl(row, y, E->k); break;
    case BK_TYPE_IQ4_XS: bk_dequant_row_iq4_xs(row, y, E->k); break;
    case BK_TYPE_Q4_1: bk_dequant_row_q4_1(row, y, E->k); break;
    case BK_TYPE_Q4_K: bk_dequant_row_q4_K(row, y, E->k); break;
    case BK_TYPE_Q5_K: bk_dequant_row_q5_K(row, y, E->k); break;
    case BK_TYPE_Q6_K: bk_dequant_row_q6_K(row, y, E->k); break;
    case BK_TYPE_TQ1_0: bk_dequant_row_tq1_0(row, y, E->k); break;
    case BK_TYPE_TQ2_0: bk_dequant_row_tq2_0(row, y, E->k); break;
    default: memcpy(y, row, (size_t)E->k * sizeof(float)); break;
    }
}

/* Where the activation columns of a matmul site live: one base per slot (the column c0 computed first is at
 * base, column c0+i at base + i*col) */
typedef struct {
    uint8_t *base[BK_ACT_SLOTS];
    size_t col[BK_ACT_SLOTS];
} act_view;

/* A site with at most PRIV columns prepares its activations in every thread, into the thread's own buffer: no
 * barrier between the norm (or attention) and the matmul. More columns: each thread prepares its share into
 * the shared buffer, then a barrier. */
#define PRIV 2

/* a view over one of the state's activation buffer sets, starting at column `first` */
static act_view view_of(const bk_fwd_state *st, uint8_t *const bufs[BK_ACT_SLOTS], size_t first) {
    act_view v;
    for (int s = 0; s < BK_ACT_SLOTS; s++) {
        v.col[s] = st->act_col[s];
        v.base[s] = bufs[s] ? bufs[s] + first * st->act_col[s] : NULL;
    }
    return v;
}

static act_view shared_view(const bk_fwd_state *st, int64_t c0) { return view_of(st, st->act, (size_t)c0); }
static act_view down_view(const bk_fwd_state *st, int64_t c0) { return view_of(st, st->act_down, (size_t)c0); }
static act_view private_view(const bk_fwd_state *st, int ith) {
    return view_of(st, st->act_priv, (size_t)ith * PRIV);
}

static int n_jobs(const bk_site *s) {
    int nj = 0;
    while (nj < BK_SITE_JOBS && s->jobs[nj].W) nj++;
    return nj;
}

/* Column i of a view for every activation type the site's matrices take (each type once), from x[k]. */
static void prep_col(const act_view *v, const bk_mm_job *jobs, int nj, const float *x, int32_t k, int64_t i) {
    int done[BK_ACT_SLOTS] = {0};
    for (int j = 0; j < nj; j++) {
        const int32_t t = bk_act_type(jobs[j].W->type);
        const int s = act_slot(t);
        if (done[s]) continue;
        done[s] = 1;
        bk_act_prepare(t, x, k, v->base[s] + (size_t)i * v->col[s]);
    }
}

/* The rows of each job split over the threads (bk_matmul_split); columns c0 .. c0+nc-1, their activations in v
 * (column c0 at the base); n_node decides the kernels. */
static int repacked_q4_K(const bk_matrix *W) { return W->type == BK_TYPE_Q4_K && W->x8; }

int bk_fwd_repacked_q4_K(const bk_matrix *W) { return repacked_q4_K(W); }

/* A repacked Q4_K job over the site's whole node (its activations laid out by bk_act_prepare_q4_K_8x8 in
 * act_q4k): the product of this thread's rows, then, with a residual, out = product + res row by row (ggml's
 * MUL_MAT then ADD; the product goes through the state's y as the residual may be out itself). */
static void run_q4_K_job(const bk_fwd_state *st, const bk_mm_job *J, int64_t c0, int nc, int64_t r0, int64_t r1) {
    const size_t a_col = bk_act_row_bytes_q8_K(J->W->k);
    if (!J->res) {
        bk_matmul(J->W, st->act_q4k, a_col, nc, nc, r0, r1, J->out + c0 * J->out_col, J->out_col, NULL, 0);
        return;
    }
    bk_matmul(J->W, st->act_q4k, a_col, nc, nc, r0, r1, st->y, J->out_col, NULL, 0);
    for (int c = 0; c < nc; c++) {
        float *o = J->out + (c0 + c) * J->out_col;
        const float *p = st->y + c * J->out_col, *rs = J->res + (c0 + c) * J->out_col;
        for (int64_t r = r0; r < r1; r++) o[r] = p[r] + rs[r];
    }
}

static void run_jobs(const bk_fwd_state *st, const act_view *v, const bk_mm_job *jobs, int nj, int64_t c0, int nc,
                     int n_node, int ith, int nth) {
    for (int j = 0; j < nj; j++) {
        const bk_mm_job *J = &jobs[j];
        const int64_t r0 = bk_matmul_split(J->W->m, ith, nth), r1 = bk_matmul_split(J->W->m, ith + 1, nth);
        if (r0 < r1 && repacked_q4_K(J->W)) {
            run_q4_K_job(st, J, c0, nc, r0, r1);
        } else if (r0 < r1) {
            const int s = act_slot(bk_act_type(J->W->type));
            bk_matmul(J->W, v->base[s], v->col[s], nc, n_node, r0, r1, J->out + c0 * J->out_col, J->out_col,
                      J->res ? J->res + c0 * J->out_col : NULL, J->out_col);
        }
    }
}

/* The activations of the site's columns: RMS norm first when it has one, or the rotation. Few columns: every
 * thread, privately (returns the private view); else each thread its share into the shared buffer, then a
 * barrier (returns the shared view). */
static act_view prep_site(const bk_ubatch *u, const bk_site *S, int nj, int ith, int nth) {
    const bk_fwd_state *st = u->st;
    const float eps = u->cfg->rms_eps;
    const int32_t k = S->k;
    float *scratch = st->scratch + (size_t)ith * st->scratch_floats;  /* this thread's float[k] */
    int q4k = 0;
    for (int j = 0; j < nj; j++) q4k |= repacked_q4_K(S->jobs[j].W);
    if (S->nc <= PRIV && !q4k) {
        const act_view v = private_view(st, ith);
        for (int i = 0; i < S->nc; i++) {
            const float *src = S->x + (S->c0 + i) * S->x_row;
            if (S->norm) {
                bk_rms_norm_mul_f32(k, src, S->norm, eps, scratch);
                src = scratch;
            } else if (S->rotate64) {
                memcpy(scratch, src, (size_t)k * sizeof(float));
                bk_hadamard_rows(scratch, k / 64, 64, 64, 0, 1);
                src = scratch;
            }
            prep_col(&v, S->jobs, nj, src, k, i);
        }
        return v;
    }
    const act_view v = shared_view(st, S->c0);
    for (int64_t i = ith; i < S->nc; i += nth) {
        float *src = (float *)S->x + (S->c0 + i) * S->x_row;
        if (S->norm) {
            float *h = st->h + (S->c0 + i) * S->x_row;
            bk_rms_norm_mul_f32(k, src, S->norm, eps, h);
            src = h;
        } else if (S->rotate64) {
            bk_hadamard_rows(src, k / 64, 64, 64, 0, 1);  /* in place: the row is this thread's alone */
        }
        prep_col(&v, S->jobs, nj, src, k, i);
    }
#pragma omp barrier
    if (q4k) {  /* the repacked Q4_K jobs read the whole node's columns in ggml's q8_K 4x8 layout */
        const float *x0 = S->norm ? st->h + S->c0 * S->x_row : S->x + S->c0 * S->x_row;
        bk_act_prepare_q4_K_8x8(x0, S->x_row, S->nc, k, st->act_q4k, ith, nth);
#pragma omp barrier
    }
    return v;
}

/* ---------------------------------------------------------------- steps */

void bk_fwd_embed(const bk_ubatch *u, int ith, int nth) {
    const bk_model_config *cfg = u->cfg;
    bk_fwd_state *st = u->st;
    if (u->n_stream)  /* each stream's rows against its own cells (and SWA cells), over the ubatch's n_kv */
        for (int s = 0; s < u->n_stream; s++) {
            const int64_t r0 = (int64_t)s * u->n_seq_tokens;
            bk_kv_mask_f16(&u->streams[s]->cells, st->pos + r0, (uint32_t)u->n_seq_tokens, u->n_kv,
                           st->mask + r0 * st->kv_max, st->kv_max, ith, nth);
            if (u->kv_swa)
                bk_kv_mask_f16(&u->streams[s]->swa->cells, st->pos + r0, (uint32_t)u->n_seq_tokens, u->n_kv_swa,
                               st->mask_swa + r0 * st->kv_max, st->kv_max, ith, nth);
        }
    else if (u->row_seq)
        bk_kvu_mask_f16(&u->kv->cells, st->pos, u->row_seq, (uint32_t)u->n, u->n_kv, st->mask, st->kv_max, ith,
                        nth);
    else
        bk_kv_mask_f16(&u->kv->cells, st->pos, (uint32_t)u->n, u->n_kv, st->mask, st->kv_max, ith, nth);
    if (u->kv_swa && u->row_seq)
        bk_kvu_mask_f16(&u->kv_swa->cells, st->pos, u->row_seq, (uint32_t)u->n, u->n_kv_swa, st->mask_swa, st->kv_max,
                        ith, nth);
    else if (u->kv_swa && !u->n_stream)
        bk_kv_mask_f16(&u->kv_swa->cells, st->pos, (uint32_t)u->n, u->n_kv_swa, st->mask_swa, st->kv_max, ith, nth);
    for (int t = ith; t < u->n; t += nth) {
        get_row(&u->w->tok_embd, u->tokens[t], st->x + (int64_t)t * cfg->n_embd);
        bk_rope_cache(st->pos[t], cfg->n_rot, st->theta_scale, st->rope + (int64_t)t * cfg->n_rot);
        if (u->kv_swa)
            bk_rope_cache(st->pos[t], cfg->n_rot, st->theta_scale_swa, st->rope_swa + (int64_t)t * cfg->n_rot);
    }
}

void bk_fwd_site(const bk_ubatch *u, const bk_site *s, int ith, int nth) {
    const int nj = n_jobs(s);
    const act_view v = prep_site(u, s, nj, ith, nth);
    run_jobs(u->st, &v, s->jobs, nj, s->c0, s->nc, s->n_node, ith, nth);
}

void bk_fwd_qkv_site(const bk_ubatch *u, int l, int ith, int nth) {
    const bk_model_config *cfg = u->cfg;
    const bk_fwd_state *st = u->st;
    const bk_layer *L = &u->w->layers[l];
    const int E = cfg->n_embd;
    const int64_t nq = (int64_t)cfg->n_head * cfg->head_dim, nk = (int64_t)cfg->n_head_kv * cfg->head_dim;
    bk_fwd_site(u, &(const bk_site){
        .x = st->x, .x_row = E, .k = E, .norm = L->attn_norm, .c0 = 0, .nc = u->n, .n_node = u->n,
        .jobs = {{.W = &L->wq, .out = st->q, .out_col = nq},
                 {.W = &L->wk, .out = st->k, .out_col = nk},
                 {.W = &L->wv, .out = st->v, .out_col = nk}}}, ith, nth);
}

void bk_fwd_down_site(const bk_ubatch *u, const bk_site *s, int ith, int nth) {
    const bk_fwd_state *st = u->st;
    const act_view v = down_view(st, s->c0);
    if (repacked_q4_K(s->jobs[0].W)) {  /* after bk_fwd_swiglu and its barrier: the node's rows of h, repacked */
        const int F = u->cfg->n_ff;
        bk_act_prepare_q4_K_8x8(st->h + s->c0 * F, F, s->nc, F, st->act_q4k, ith, nth);
#pragma omp barrier
    }
    run_jobs(st, &v, s->jobs, n_jobs(s), s->c0, s->nc, s->n_node, ith, nth);
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

/* One token's rows after RoPE into a Q8_0 cache: build_attn's Hadamard rotations of q, k and v (when the cache
 * rotates), then quantize_row_q8_0 of k and v into cell idx[0] of layer l. */
static void store_q8_0_row(const bk_ubatch *u, float *q, float *k, float *v, int64_t nq, int64_t nk,
                           const bk_kv_cache *c, int l, const uint32_t *idx) {
    const int rot_k = u->rot_k;
    if (rot_k) {
        bk_hadamard_rows(q, nq / rot_k, rot_k, rot_k, 0, 1);
        bk_hadamard_rows(k, nk / rot_k, rot_k, rot_k, 0, 1);
        bk_hadamard_rows(v, nk / 64, 64, 64, 0, 1);
    }
    bk_kv_store_q8_0(k, nk, 1, (uint32_t)nk, idx, bk_kv_cache_k(c, l), (int64_t)c->k_row_bytes, 0, 1);
    bk_kv_store_q8_0(v, nk, 1, (uint32_t)nk, idx, bk_kv_cache_v(c, l), (int64_t)c->v_row_bytes, 0, 1);
}

void bk_fwd_rope_store(const bk_ubatch *u, int l, int ith, int nth) {
    const bk_model_config *cfg = u->cfg;
    const bk_kv_cache *kv = u->kv;
    const bk_fwd_state *st = u->st;
    const int hd = cfg->head_dim, n = u->n;
    const int64_t nq = (int64_t)cfg->n_head * hd, nk = (int64_t)cfg->n_head_kv * hd;
    if (!u->q8) {
        /* this thread's rows of q, k and v (the Q, K, V site's split) */
        const int64_t aq = bk_matmul_split(nq, ith, nth), bq = bk_matmul_split(nq, ith + 1, nth);
        const int64_t ak = bk_matmul_split(nk, ith, nth), bk = bk_matmul_split(nk, ith + 1, nth);
        uint16_t *kc = (uint16_t *)bk_kv_cache_k(kv, l), *vc = (uint16_t *)bk_kv_cache_v(kv, l);
        for (int t = 0; t < n; t++) {
            const float *rc = st->rope + (int64_t)t * cfg->n_rot;
            rope_range(st->q + t * nq, aq, bq, hd, cfg->n_rot, rc);
            rope_range(st->k + t * nk, ak, bk, hd, cfg->n_rot, rc);
        }
        if (bk > ak && u->n_stream) {
            /* each stream's rows into its own cache */
            const int ns = u->n_seq_tokens;
            for (int s = 0; s < u->n_stream; s++) {
                const bk_kv_cache *c = u->streams[s];
                uint16_t *ks = (uint16_t *)bk_kv_cache_k(c, l), *vs = (uint16_t *)bk_kv_cache_v(c, l);
                const int64_t r0 = (int64_t)s * ns;
                bk_kv_store_f16(st->k + r0 * nk + ak, nk, (uint32_t)ns, (uint32_t)(bk - ak), st->idxs + r0,
                                ks + ak, nk, 0, 1);
                bk_kv_store_f16(st->v + r0 * nk + ak, nk, (uint32_t)ns, (uint32_t)(bk - ak), st->idxs + r0,
                                vs + ak, nk, 0, 1);
            }
        } else if (bk > ak) {
            bk_kv_store_f16(st->k + ak, nk, (uint32_t)n, (uint32_t)(bk - ak), st->idxs, kc + ak, nk, 0, 1);
            bk_kv_store_f16(st->v + ak, nk, (uint32_t)n, (uint32_t)(bk - ak), st->idxs, vc + ak, nk, 0, 1);
        }
        return;
    }
    /* RoPE, rotation and the Q8_0 store need whole rows: by tokens, once every thread's rows are in */
#pragma omp barrier
    for (int t = ith; t < n; t += nth) {
        float *q = st->q + t * nq, *k = st->k + t * nk, *v = st->v + t * nk;
        const float *rc = st->rope + (int64_t)t * cfg->n_rot;
        bk_rope_normal(q, cfg->n_head, hd, cfg->n_rot, rc);
        bk_rope_normal(k, cfg->n_head_kv, hd, cfg->n_rot, rc);
        const bk_kv_cache *c = u->n_stream ? u->streams[t / u->n_seq_tokens] : kv;  /* the row's stream */
        store_q8_0_row(u, q, k, v, nq, nk, c, l, st->idxs + t);
    }
}

void bk_fwd_qk_norm_store(const bk_ubatch *u, int l, const bk_kv_cache *kv, const uint32_t *idxs,
                          const float *rope, float q_scale, int ith, int nth) {
    const bk_model_config *cfg = u->cfg;
    const bk_layer *L = &u->w->layers[l];
    const bk_fwd_state *st = u->st;
    const int hd = cfg->head_dim;
    const int64_t nq = (int64_t)cfg->n_head * hd, nk = (int64_t)cfg->n_head_kv * hd;
    const float eps = cfg->rms_eps;
    for (int t = ith; t < u->n; t += nth) {
        /* the row's cache: its stream's with several streams (bk_fwd_decode_seqs; the stream's SWA cache when kv
         * is the ubatch's SWA one), else kv */
        const bk_kv_cache *c = !u->n_stream ? kv
            : kv == u->kv_swa ? u->streams[t / u->n_seq_tokens]->swa : u->streams[t / u->n_seq_tokens];
        const float *rc = rope + (int64_t)t * cfg->n_rot;
        float *q = st->q + t * nq, *k = st->k + t * nk;
        for (int h = 0; h < cfg->n_head; h++) {
            float *qh = q + (int64_t)h * hd;
            bk_rms_norm_mul_f32(hd, qh, L->q_norm, eps, qh);
            bk_rope_neox(qh, 1, 0, cfg->n_rot, rc);
            if (q_scale != 1.0f)
                for (int i = 0; i < hd; i++) qh[i] = qh[i] * q_scale;
        }
        for (int h = 0; h < cfg->n_head_kv; h++) {
            float *kh = k + (int64_t)h * hd;
            bk_rms_norm_mul_f32(hd, kh, L->k_norm, eps, kh);
            bk_rope_neox(kh, 1, 0, cfg->n_rot, rc);
        }
        if (u->q8) {   /* a Q8_0 cache (qwen3), as bk_fwd_rope_store stores it after its RoPE */
            store_q8_0_row(u, q, k, st->v + t * nk, nq, nk, c, l, idxs + t);
            continue;
        }
        bk_kv_store_f16(k, nk, 1, (uint32_t)nk, idxs + t, (uint16_t *)bk_kv_cache_k(c, l), nk, 0, 1);
        bk_kv_store_f16(st->v + t * nk, nk, 1, (uint32_t)nk, idxs + t, (uint16_t *)bk_kv_cache_v(c, l), nk, 0, 1);
    }
}

void bk_fwd_attention(const bk_ubatch *u, int l, int ith, int nth) {
    if (u->n_stream) {
        bk_fwd_attention_streams(u, l, 0, u->cfg->kq_scale, ith, nth);
        return;
    }
    const bk_model_config *cfg = u->cfg;
    const bk_kv_cache *kv = u->kv;
    const bk_fwd_state *st = u->st;
    const int hd = cfg->head_dim;
    const int64_t nq = (int64_t)cfg->n_head * hd, nk = (int64_t)cfg->n_head_kv * hd;
    if (u->q8) {
        const bk_attn_q8_0_args a = {
            .n_tokens = u->n, .n_head = cfg->n_head, .n_head_kv = cfg->n_head_kv, .dk = hd, .dv = hd,
            .n_kv = (int32_t)u->n_kv, .scale = cfg->kq_scale,
            .q = st->q, .q_row = nq, .q_head = hd,
            .k = bk_kv_cache_k(kv, l), .k_cell = (int64_t)kv->k_row_bytes, .k_head = hd / BK_QK * 34,
            .v = bk_kv_cache_v(kv, l), .v_cell = (int64_t)kv->v_row_bytes, .v_head = hd / BK_QK * 34,
            .mask = st->mask, .mask_row = st->kv_max,
            .out = st->att, .out_row = nq, .out_head = hd,
            .scratch = st->attn_scratch,
        };
        bk_attn_q8_0(&a, ith, nth);
        return;
    }
    const bk_attn_f16_args a = {
        .n_tokens = u->n, .n_head = cfg->n_head, .n_head_kv = cfg->n_head_kv, .dk = hd, .dv = hd,
        .n_kv = (int32_t)u->n_kv, .scale = cfg->kq_scale, .oracle_nth = st->oracle_nth,
        .multi_stream = st->multi_stream,
        .q = st->q, .q_row = nq, .q_head = hd,
        .k = (const uint16_t *)bk_kv_cache_k(kv, l), .k_cell = nk, .k_head = hd,
        .v = (const uint16_t *)bk_kv_cache_v(kv, l), .v_cell = nk, .v_head = hd,
        .mask = st->mask, .mask_row = st->kv_max,
        .out = st->att, .out_row = nq, .out_head = hd,
        .scratch = st->attn_scratch,
    };
    bk_attn_f16(&a, ith, nth);
    if (u->attn_path == BK_ATTN_SPLIT_KV) {
#pragma omp barrier
        bk_attn_f16_reduce(&a, ith, nth);
    }
}

/* Several KV streams (ggml's Q, K, V and mask with ne[3] = streams): each stream's rows attend over its own
 * cache's cells 0 .. n_kv-1 with its mask rows; never split-KV; the tiled path's row chunks are cut over every
 * stream's rows (bk_attn_f16_args n_stream, stream). No barrier between streams: their outputs are apart and
 * the one-chunk and tiled paths keep their scratch per thread. */
void bk_fwd_attention_streams(const bk_ubatch *u, int l, int swa, float scale, int ith, int nth) {
    const bk_model_config *cfg = u->cfg;
    const bk_fwd_state *st = u->st;
    const int hd = cfg->head_dim, ns = u->n_seq_tokens;
    const int64_t nq = (int64_t)cfg->n_head * hd, nk = (int64_t)cfg->n_head_kv * hd;
    const uint32_t n_kv = swa ? u->n_kv_swa : u->n_kv;
    const uint16_t *mask = swa ? st->mask_swa : st->mask;
    for (int s = 0; s < u->n_stream; s++) {
        const bk_kv_cache *kv = swa ? u->streams[s]->swa : u->streams[s];
        const int64_t r0 = (int64_t)s * ns;
        if (u->q8) {
            const bk_attn_q8_0_args a = {
                .n_tokens = ns, .n_head = cfg->n_head, .n_head_kv = cfg->n_head_kv, .dk = hd, .dv = hd,
                .n_kv = (int32_t)n_kv, .scale = scale,
                .q = st->q + r0 * nq, .q_row = nq, .q_head = hd,
                .k = bk_kv_cache_k(kv, l), .k_cell = (int64_t)kv->k_row_bytes, .k_head = hd / BK_QK * 34,
                .v = bk_kv_cache_v(kv, l), .v_cell = (int64_t)kv->v_row_bytes, .v_head = hd / BK_QK * 34,
                .mask = mask + r0 * st->kv_max, .mask_row = st->kv_max,
                .out = st->att + r0 * nq, .out_row = nq, .out_head = hd,
                .scratch = st->attn_scratch,
            };
            bk_attn_q8_0(&a, ith, nth);
            continue;
        }
        const bk_attn_f16_args a = {
            .n_tokens = ns, .n_head = cfg->n_head, .n_head_kv = cfg->n_head_kv, .dk = hd, .dv = hd,
            .n_kv = (int32_t)n_kv, .scale = scale, .oracle_nth = st->oracle_nth,
            .multi_stream = 1, .n_stream = u->n_stream, .stream = s,
            .q = st->q + r0 * nq, .q_row = nq, .q_head = hd,
            .k = (const uint16_t *)bk_kv_cache_k(kv, l), .k_cell = nk, .k_head = hd,
            .v = (const uint16_t *)bk_kv_cache_v(kv, l), .v_cell = nk, .v_head = hd,
            .mask = mask + r0 * st->kv_max, .mask_row = st->kv_max,
            .out = st->att + r0 * nq, .out_row = nq, .out_head = hd,
            .scratch = st->attn_scratch,
        };
        bk_attn_f16(&a, ith, nth);
    }
}

static int64_t swiglu_split(int64_t F, int ith, int nth, int32_t act_type) {
    if (act_type != BK_TYPE_Q8_K) return bk_matmul_split(F, ith, nth);
    return ith >= nth ? F : F * ith / nth / BK_QK_K * BK_QK_K;
}

void bk_fwd_swiglu(const bk_ubatch *u, const bk_matrix *down, int64_t c0, int nc, int ith, int nth) {
    const bk_fwd_state *st = u->st;
    const int F = u->cfg->n_ff;
    const int32_t dt = bk_act_type(down->type);
    /* each thread quantizes whole blocks of its share: Q8_K's are 256 values (the 32-aligned split would cut
     * one when n_ff / 256 is odd), the others' 32 */
    const int64_t a = swiglu_split(F, ith, nth, dt), b = swiglu_split(F, ith + 1, nth, dt);
    /* a thread reads the gate and up rows it computed itself (bk_matmul_split) unless the shares differ: then
     * wait for all of them (the same answer in every thread) */
    int other = 0;
    for (int i = 1; i < nth; i++) other |= swiglu_split(F, i, nth, dt) != bk_matmul_split(F, i, nth);
    if (other) {
#pragma omp barrier
    }
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

void bk_fwd_head(const bk_ubatch *u, int ith, int nth) {
    const bk_model_weights *w = u->w;
    const bk_site S = {.x = u->st->x, .x_row = u->cfg->n_embd, .k = u->cfg->n_embd, .norm = w->output_norm,
                       .c0 = u->out_c0, .nc = u->n_out, .n_node = u->n_out, .jobs = {{.W = &w->output}}};
    const act_view v = prep_site(u, &S, 1, ith, nth);
    const bk_mm_job J = {.W = &w->output, .out = u->logits ? u->logits : u->st->logits, .out_col = u->cfg->n_vocab};
    run_jobs(u->st, &v, &J, 1, 0, u->n_out, u->n_out, ith, nth);  /* a repacked Q4_K head included */
}

void bk_fwd_gather_outputs(const bk_ubatch *u, float *a, int64_t a_row, int ith, int nth) {
    (void)nth;
    if (ith != 0) return;
    const int64_t E = u->cfg->n_embd;
    for (int i = 0; i < u->n_out; i++) {
        const int64_t r = u->out_rows[i];
        if (r == i) continue;
        memcpy(a + i * a_row, a + r * a_row, (size_t)a_row * sizeof(float));
        memcpy(u->st->x + i * E, u->st->x + r * E, (size_t)E * sizeof(float));
    }
}

void bk_fwd_embd_rows(const bk_ubatch *u, int ith, int nth) {
    const int E = u->cfg->n_embd;
    for (int t = ith; t < u->n; t += nth) {
        const int64_t r = (int64_t)t * E;
        bk_rms_norm_mul_f32(E, u->st->x + r, u->w->output_norm, u->cfg->rms_eps, u->embd + r);
    }
}

/* ---------------------------------------------------------------- decode */

static int decode(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv, bk_fwd_state *st,
                  const int32_t *tokens, int32_t n, int32_t pos0, float *embd) {
    if (n <= 0 || pos0 < 0 || kv->size > st->kv_max) return BK_FWD_BAD_ARGS;
    if ((cfg->n_swa > 0) != (kv->swa != NULL) || (kv->swa && (!st->mask_swa || kv->type != BK_TYPE_F16)))
        return BK_FWD_BAD_ARGS;
    if (cfg->arch < 0 || cfg->arch >= BK_ARCH_COUNT) return BK_FWD_BAD_ARGS;
    /* the per-head Q/K norm step stores F16 rows, or Q8_0 ones in the qwen3 graph only (bk_fwd_qk_norm_store:
     * Gemma 3's Q8_0 cache is not reproduced) */
    if (cfg->n_layer > 0 && w->layers[0].q_norm && kv->type != BK_TYPE_F16 && cfg->arch != BK_ARCH_QWEN3)
        return BK_FWD_BAD_ARGS;
    if ((int64_t)pos0 + n > (int64_t)kv->size) return BK_FWD_CACHE_FULL;
    const bk_ubatch_graph graph = arch_graphs[cfg->arch];
    const int q8 = kv->type == BK_TYPE_Q8_0;
    const int rot_k = q8 ? bk_attn_rot_k_size(cfg->head_dim) : 0;
    for (int32_t u0 = 0; u0 < n; u0 += st->n_ubatch) {
        const int nu = n - u0 < st->n_ubatch ? n - u0 : st->n_ubatch;
        for (int t = 0; t < nu; t++) st->pos[t] = pos0 + u0 + t;
        if (bk_kv_find_slot(&kv->cells, st->pos, (uint32_t)nu, st->idxs) != 0) return BK_FWD_CACHE_FULL;
        /* llama_kv_cache_iswa: a slot in both caches, or the ubatch fails */
        if (kv->swa && bk_kv_find_slot(&kv->swa->cells, st->pos, (uint32_t)nu, st->idxs_swa) != 0)
            return BK_FWD_CACHE_FULL;
        bk_kv_apply_ubatch(&kv->cells, st->idxs, st->pos, (uint32_t)nu);
        const uint32_t n_kv = bk_kv_n_kv(&kv->cells);
        uint32_t n_kv_swa = 0;
        if (kv->swa) {
            bk_kv_apply_ubatch(&kv->swa->cells, st->idxs_swa, st->pos, (uint32_t)nu);
            n_kv_swa = bk_kv_n_kv(&kv->swa->cells);
        }
        const bk_ubatch u = {
            .cfg = cfg, .w = w, .kv = kv, .st = st, .tokens = tokens + u0, .n = nu, .n_kv = n_kv,
            .want_logits = u0 + nu == n, .out_c0 = nu - 1, .n_out = u0 + nu == n,
            .q8 = q8, .rot_k = rot_k, .rot_out = q8 && rot_k,
            .attn_path = bk_attn_f16_path_streams(nu, (int32_t)n_kv, cfg->head_dim, st->multi_stream),
            .embd = embd ? embd + (int64_t)u0 * cfg->n_embd : NULL,
            .kv_swa = kv->swa, .n_kv_swa = n_kv_swa,
            .attn_path_swa = kv->swa ? bk_attn_f16_path_streams(nu, (int32_t)n_kv_swa, cfg->head_dim,
                                                                st->multi_stream) : 0,
        };
#pragma omp parallel num_threads(st->nth)
        graph(&u, omp_get_thread_num(), omp_get_num_threads());
    }
    return BK_FWD_OK;
}

int bk_fwd_decode(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv, bk_fwd_state *st,
                  const int32_t *tokens, int32_t n, int32_t pos0) {
    return decode(cfg, w, kv, st, tokens, n, pos0, NULL);
}

int bk_fwd_decode_embd(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv, bk_fwd_state *st,
                       const int32_t *tokens, int32_t n, int32_t pos0, float *embd) {
    if (!embd) return BK_FWD_BAD_ARGS;
    return decode(cfg, w, kv, st, tokens, n, pos0, embd);
}

/* ---------------------------------------------------------------- several sequences (bk_fwd_decode_seqs) */

/* The graphs whose steps honour several sequences in a ubatch (bk_ubatch's n_stream / row_seq / out_rows). */
static int multi_seq_graph(const bk_model_config *cfg) {
    return cfg->arch == BK_ARCH_LLAMA || cfg->arch == BK_ARCH_QWEN3 || cfg->arch == BK_ARCH_GEMMA3;
}

static int seqs_checked(const bk_model_config *cfg, const bk_fwd_state *st, const bk_fwd_seq *seqs, int32_t n) {
    /* the llama, qwen3 and Gemma 3 graphs honour several streams (forward_llama.c, forward_gemma3.c) */
    if (n <= 0 || n > st->n_ubatch || n > BK_FWD_MAX_SEQ || !multi_seq_graph(cfg)) return BK_FWD_BAD_ARGS;
    unsigned char seen[BK_FWD_MAX_SEQ] = {0};
    for (int32_t i = 0; i < n; i++) {
        const bk_fwd_seq *q = &seqs[i];
        if (!q->kv || !q->tokens || q->n <= 0 || q->pos0 < 0 || q->kv->size > st->kv_max) return BK_FWD_BAD_ARGS;
        /* a model with sliding-window layers: every stream has its SWA cache (F16, as decode() wants it) */
        if ((cfg->n_swa > 0) != (q->kv->swa != NULL) || (q->kv->swa && (!st->mask_swa || q->kv->type != BK_TYPE_F16)))
            return BK_FWD_BAD_ARGS;
        if (q->kv->swa && (q->kv->swa->size > st->kv_max || q->kv->swa->size != seqs[0].kv->swa->size))
            return BK_FWD_BAD_ARGS;
        if (q->kv->size != seqs[0].kv->size || q->kv->type != seqs[0].kv->type) return BK_FWD_BAD_ARGS;
        if (q->seq_id < 0 || q->seq_id >= BK_FWD_MAX_SEQ || seen[q->seq_id]) return BK_FWD_BAD_ARGS;
        seen[q->seq_id] = 1;
        for (int32_t j = 0; j < i; j++)
            if (seqs[j].kv == q->kv) return BK_FWD_BAD_ARGS;  /* one stream per sequence */
    }
    for (int32_t i = 0; i < n; i++)
        if ((int64_t)seqs[i].pos0 + seqs[i].n > (int64_t)seqs[i].kv->size) return BK_FWD_CACHE_FULL;
    return BK_FWD_OK;
}

int bk_fwd_decode_seqs(const bk_model_config *cfg, const bk_model_weights *w, bk_fwd_state *st,
                       const bk_fwd_seq *seqs, int32_t n_seqs, float *logits, int32_t *out_seq, int32_t *n_out) {
    *n_out = 0;
    const int rc = seqs_checked(cfg, st, seqs, n_seqs);
    if (rc != BK_FWD_OK) return rc;
    const int nub = st->n_ubatch;
    /* per sequence: tokens already placed in a ubatch; per ubatch: its sequences, tokens, output rows, streams */
    int32_t *taken = (int32_t *)calloc((size_t)n_seqs * 2 + (size_t)nub * 2, sizeof(int32_t));
    bk_kv_cache **strm = (bk_kv_cache **)calloc((size_t)n_seqs, sizeof(bk_kv_cache *));
    if (!taken || !strm) {
        free(taken);
        free(strm);
        return BK_FWD_NO_MEMORY;
    }
    int32_t *set = taken + n_seqs, *tok = set + n_seqs, *out_rows = tok + nub;
    const int q8 = seqs[0].kv->type == BK_TYPE_Q8_0;
    const int rot_k = q8 ? bk_attn_rot_k_size(cfg->head_dim) : 0;
    const bk_ubatch_graph graph = arch_graphs[cfg->arch];
    int32_t outs = 0;
    for (;;) {
        /* split_equal(n_ubatch, sequential = true): from the first sequence with tokens left, the sequences
         * whose ids follow one another, in batch order */
        int ns = 0;
        int32_t last = -1;
        for (int32_t i = 0; i < n_seqs; i++) {
            if (taken[i] == seqs[i].n || (ns > 0 && seqs[i].seq_id != last + 1)) continue;
            set[ns++] = i;
            last = seqs[i].seq_id;
        }
        if (ns == 0) break;
        /* as many tokens of each as all have left, while (count + 1) * ns <= n_ubatch (one at least) */
        int32_t nst = nub / ns > 0 ? nub / ns : 1;
        for (int s = 0; s < ns; s++)
            if (seqs[set[s]].n - taken[set[s]] < nst) nst = seqs[set[s]].n - taken[set[s]];
        const int nu = ns * nst;
        int n_o = 0;
        uint32_t n_kv = 0, n_kv_swa = 0;
        for (int s = 0; s < ns; s++) {
            const bk_fwd_seq *q = &seqs[set[s]];
            const int r0 = s * nst;
            for (int j = 0; j < nst; j++) {
                tok[r0 + j] = q->tokens[taken[set[s]] + j];
                st->pos[r0 + j] = q->pos0 + taken[set[s]] + j;
            }
            /* llama_kv_cache_iswa: the stream's cells in its base and SWA caches, or the decode fails */
            bk_kv_cache *sw = q->kv->swa;
            if (bk_kv_find_slot(&q->kv->cells, st->pos + r0, (uint32_t)nst, st->idxs + r0) != 0
                || (sw && bk_kv_find_slot(&sw->cells, st->pos + r0, (uint32_t)nst, st->idxs_swa + r0) != 0)) {
                free(taken);
                free(strm);
                return BK_FWD_CACHE_FULL;
            }
            bk_kv_apply_ubatch(&q->kv->cells, st->idxs + r0, st->pos + r0, (uint32_t)nst);
            const uint32_t nk = bk_kv_n_kv(&q->kv->cells);  /* get_n_kv: the largest of the ubatch's streams */
            if (nk > n_kv) n_kv = nk;
            if (sw) {
                bk_kv_apply_ubatch(&sw->cells, st->idxs_swa + r0, st->pos + r0, (uint32_t)nst);
                const uint32_t nks = bk_kv_n_kv(&sw->cells);
                if (nks > n_kv_swa) n_kv_swa = nks;
            }
            taken[set[s]] += nst;
            if (q->output && taken[set[s]] == q->n) {
                out_rows[n_o] = r0 + nst - 1;
                out_seq[outs + n_o] = set[s];
                n_o++;
            }
            strm[s] = q->kv;
        }
        bk_ubatch u = {
            .cfg = cfg, .w = w, .kv = strm[0], .st = st, .tokens = tok, .n = nu, .n_kv = n_kv,
            .want_logits = n_o > 0, .n_out = n_o, .out_c0 = ns == 1 ? nu - 1 : 0,
            .logits = logits ? logits + (int64_t)outs * cfg->n_vocab : NULL,
            .q8 = q8, .rot_k = rot_k, .rot_out = q8 && rot_k,
            .attn_path = bk_attn_f16_path_streams(nu, (int32_t)n_kv, cfg->head_dim, ns > 1),
            .kv_swa = strm[0]->swa, .n_kv_swa = n_kv_swa,
            .attn_path_swa = strm[0]->swa ? bk_attn_f16_path_streams(nu, (int32_t)n_kv_swa, cfg->head_dim, ns > 1)
                                          : 0,
        };
        if (ns > 1) {
            u.n_stream = ns;
            u.n_seq_tokens = nst;
            u.streams = strm;
            u.out_rows = out_rows;
        }
#pragma omp parallel num_threads(st->nth)
        graph(&u, omp_get_thread_num(), omp_get_num_threads());
        outs += n_o;
    }
    free(taken);
    free(strm);
    *n_out = outs;
    return BK_FWD_OK;
}

/* ---------------------------------------------------------------- a unified cache (bk_fwd_decode_unified) */

/* llama_kv_cache::prepare with one stream: every split_simple ubatch's cells found (and applied, to find the next
 * ones) on the current cells into idxs, then the cells restored; the decode applies them one ubatch at a time. */
static int unified_prepare(bk_kv_cells *c, const int32_t *pos, const int32_t *seq, int32_t n, int nub,
                           uint32_t *idxs) {
    const uint32_t size = c->size;
    int32_t *saved = (int32_t *)malloc(sizeof(int32_t) * 2 * (size_t)size);
    if (!saved) return BK_FWD_NO_MEMORY;
    memcpy(saved, c->pos, sizeof(int32_t) * size);
    memcpy(saved + size, c->seq, sizeof(int32_t) * size);
    const uint32_t head0 = c->head, used0 = c->used;
    int fits = 1;
    for (int32_t u0 = 0; u0 < n && fits; u0 += nub) {
        const int nu = n - u0 < nub ? n - u0 : nub;
        if (bk_kv_find_slot(c, pos + u0, (uint32_t)nu, idxs + u0) != 0) fits = 0;
        else bk_kvu_apply_ubatch(c, idxs + u0, pos + u0, seq + u0, (uint32_t)nu);
    }
    memcpy(c->pos, saved, sizeof(int32_t) * size);
    memcpy(c->seq, saved + size, sizeof(int32_t) * size);
    c->head = head0;
    c->used = used0;
    free(saved);
    return fits ? BK_FWD_OK : BK_FWD_CACHE_FULL;
}

/* bk_fwd_decode_unified, and with embd (bk_fwd_decode_embd_unified) every row an output whose t_embd lands in embd
 * (output and logits unused) */
static int decode_unified(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv, bk_fwd_state *st,
                          const int32_t *tokens, const int32_t *pos, const int32_t *seq, const int8_t *output,
                          int32_t n, float *logits, int32_t *n_out, float *embd) {
    *n_out = 0;
    if (n <= 0 || !multi_seq_graph(cfg) || !kv->cells.seq || kv->size > st->kv_max) return BK_FWD_BAD_ARGS;
    /* a model with sliding-window layers: the unified SWA cache too (F16) */
    bk_kv_cache *sw = kv->swa;
    if ((cfg->n_swa > 0) != (sw != NULL) || (sw && (!sw->cells.seq || !st->mask_swa || kv->type != BK_TYPE_F16
                                                    || sw->size > st->kv_max)))
        return BK_FWD_BAD_ARGS;
    for (int32_t i = 0; i < n; i++)
        if (seq[i] < 0 || seq[i] >= BK_FWD_MAX_SEQ || pos[i] < 0) return BK_FWD_BAD_ARGS;
    const int nub = st->n_ubatch;
    /* llama_kv_cache::prepare: every ubatch's cells found (and applied, to find the next ones) on the current
     * cells, then the cells restored; the decode then applies them one ubatch at a time */
    uint32_t *idxs = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)n * 2);
    int32_t *out_rows = (int32_t *)malloc(sizeof(int32_t) * (size_t)nub);
    if (!idxs || !out_rows) {
        free(idxs);
        free(out_rows);
        return BK_FWD_NO_MEMORY;
    }
    uint32_t *idxs_swa = idxs + n;
    bk_kv_cells *c = &kv->cells;
    /* llama_kv_cache_iswa with one stream: split_simple's ubatches placed in the base cache, then in the SWA one;
     * when either fails libllama tries split_equal, which bankml does not reproduce: CACHE_FULL */
    int rc = unified_prepare(c, pos, seq, n, nub, idxs);
    if (rc == BK_FWD_OK && sw) rc = unified_prepare(&sw->cells, pos, seq, n, nub, idxs_swa);
    if (rc != BK_FWD_OK) {
        free(idxs);
        free(out_rows);
        return rc;
    }
    const int q8 = kv->type == BK_TYPE_Q8_0;
    const int rot_k = q8 ? bk_attn_rot_k_size(cfg->head_dim) : 0;
    const bk_ubatch_graph graph = arch_graphs[cfg->arch];
    int32_t outs = 0;
    for (int32_t u0 = 0; u0 < n; u0 += nub) {
        /* split_simple: the next n_ubatch tokens of the batch */
        const int nu = n - u0 < nub ? n - u0 : nub;
        for (int t = 0; t < nu; t++) {
            st->pos[t] = pos[u0 + t];
            st->idxs[t] = idxs[u0 + t];
            if (sw) st->idxs_swa[t] = idxs_swa[u0 + t];
        }
        bk_kvu_apply_ubatch(c, st->idxs, st->pos, seq + u0, (uint32_t)nu);
        const uint32_t n_kv = bk_kv_n_kv(c);
        uint32_t n_kv_swa = 0;
        if (sw) {
            bk_kvu_apply_ubatch(&sw->cells, st->idxs_swa, st->pos, seq + u0, (uint32_t)nu);
            n_kv_swa = bk_kv_n_kv(&sw->cells);
        }
        int n_o = 0;
        for (int t = 0; t < nu; t++)
            if (embd || output[u0 + t]) out_rows[n_o++] = t;
        /* output rows side by side need no gathering (one sequence's last row, as bk_fwd_decode computes it; every
         * row with embeddings, the last layer over all of them) */
        const int gather = !embd && n_o > 0 && out_rows[n_o - 1] - out_rows[0] != n_o - 1;
        bk_ubatch u = {
            .cfg = cfg, .w = w, .kv = kv, .st = st, .tokens = tokens + u0, .n = nu, .n_kv = n_kv,
            .want_logits = n_o > 0, .n_out = n_o, .out_c0 = gather || n_o == 0 ? 0 : out_rows[0],
            .logits = logits ? logits + (int64_t)outs * cfg->n_vocab : NULL,
            .q8 = q8, .rot_k = rot_k, .rot_out = q8 && rot_k,
            .attn_path = bk_attn_f16_path(nu, (int32_t)n_kv, cfg->head_dim),
            .kv_swa = sw, .n_kv_swa = n_kv_swa,
            .attn_path_swa = sw ? bk_attn_f16_path(nu, (int32_t)n_kv_swa, cfg->head_dim) : 0,
            .out_rows = gather ? out_rows : NULL, .row_seq = seq + u0,
        };
        if (embd) {
            u.want_logits = 0;
            u.logits = NULL;
            u.embd = embd + (int64_t)u0 * cfg->n_embd;
        }
#pragma omp parallel num_threads(st->nth)
        graph(&u, omp_get_thread_num(), omp_get_num_threads());
        outs += n_o;
    }
    free(idxs);
    free(out_rows);
    *n_out = outs;
    return BK_FWD_OK;
}

int bk_fwd_decode_unified(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv, bk_fwd_state *st,
                          const int32_t *tokens, const int32_t *pos, const int32_t *seq, const int8_t *output,
                          int32_t n, float *logits, int32_t *n_out) {
    return decode_unified(cfg, w, kv, st, tokens, pos, seq, output, n, logits, n_out, NULL);
}

int bk_fwd_decode_embd_unified(const bk_model_config *cfg, const bk_model_weights *w, bk_kv_cache *kv,
                               bk_fwd_state *st, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                               int32_t n, float *embd) {
    int32_t n_out = 0;
    /* forward_llama.c's graph writes t_embd; a sliding-window cache is not taken (embeddings are the llama graph's) */
    if (cfg->arch != BK_ARCH_LLAMA || !embd || kv->swa) return BK_FWD_BAD_ARGS;
    return decode_unified(cfg, w, kv, st, tokens, pos, seq, NULL, n, NULL, &n_out, embd);
}
