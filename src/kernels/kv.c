/* llama.cpp b11192's KV-cache cell rules for one sequence, and the F16 row store (see kv.h).
 * Reference: src/llama-kv-cache.cpp (find_slot, apply_ubatch, seq_rm, get_n_kv, set_input_kq_mask),
 * src/llama-kv-cells.h, src/llama-hparams.h (is_masked_swa), ggml-cpu/ops.cpp (set_rows; from_float of F16 and
 * Q8_0). */
#include "kv.h"

#include "fp16.h"
#include "quants.h"

#define MASK_DROP ((uint16_t)0xFC00) /* -inf in F16 */

void bk_kv_cells_init(bk_kv_cells *c, int32_t *pos_buf, uint32_t size, uint32_t n_swa, int32_t swa_type) {
    c->pos = pos_buf;
    c->size = size;
    c->n_swa = n_swa;
    c->swa_type = swa_type;
    c->seq = NULL;
    bk_kv_cells_clear(c);
}

void bk_kv_cells_clear(bk_kv_cells *c) {
    for (uint32_t i = 0; i < c->size; i++) c->pos[i] = -1;
    if (c->seq)
        for (uint32_t i = 0; i < c->size; i++) c->seq[i] = -1;
    c->head = 0;
    c->used = 0;
}

static int is_masked_swa(uint32_t n_swa, int32_t swa_type, int32_t p0, int32_t p1) {
    switch (swa_type) {
    case BK_SWA_STANDARD: return p1 - p0 >= (int32_t)n_swa;
    case BK_SWA_CHUNKED: return p0 < (p1 / (int32_t)n_swa) * (int32_t)n_swa;
    case BK_SWA_SYMMETRIC: {
        const int32_t half = (int32_t)n_swa / 2, diff = p1 - p0;
        return diff < -half || diff > half;
    }
    default: return 0;
    }
}

int32_t bk_kv_seq_pos_min(const bk_kv_cells *c) {
    int32_t m = -1;
    for (uint32_t i = 0; i < c->size; i++)
        if (c->pos[i] >= 0 && (m < 0 || c->pos[i] < m)) m = c->pos[i];
    return m;
}

int32_t bk_kv_seq_pos_max(const bk_kv_cells *c) {
    int32_t m = -1;
    for (uint32_t i = 0; i < c->size; i++)
        if (c->pos[i] > m) m = c->pos[i];
    return m;
}

uint32_t bk_kv_used_max_p1(const bk_kv_cells *c) {
    for (uint32_t i = c->size; i > 0; i--)
        if (c->pos[i - 1] >= 0) return i;
    return 0;
}

uint32_t bk_kv_n_kv(const bk_kv_cells *c) {
    const uint32_t used = bk_kv_used_max_p1(c);
    uint32_t n = (used + BK_KV_PAD - 1) / BK_KV_PAD * BK_KV_PAD;
    if (n < BK_KV_PAD) n = BK_KV_PAD;
    return n < c->size ? n : c->size;
}

/* The largest position of each sequence of a unified cache (-1 for none) */
static void seq_pos_maxes(const bk_kv_cells *c, int32_t pmax[BK_KV_MAX_SEQ]) {
    for (int s = 0; s < BK_KV_MAX_SEQ; s++) pmax[s] = -1;
    for (uint32_t i = 0; i < c->size; i++)
        if (c->pos[i] >= 0 && c->pos[i] > pmax[c->seq[i]]) pmax[c->seq[i]] = c->pos[i];
}

int bk_kv_find_slot(const bk_kv_cells *c, const int32_t *pos, uint32_t n_tokens, uint32_t *idxs) {
    (void)pos; /* the positions of the ubatch do not enter the search (its causal test is disabled) */
    if (n_tokens > c->size) return -1;
    uint32_t head_cur = c->head;
    /* many free cells before head: search from the start */
    if (head_cur > c->used + 2 * n_tokens) head_cur = 0;
    /* with a window, a cell whose position its sequence's next position no longer sees can be reused (a unified
     * cache: the next position of the cell's own sequence) */
    const int swa = c->swa_type != BK_SWA_NONE;
    const int32_t p_next = bk_kv_seq_pos_max(c) + 1;
    int32_t pmax[BK_KV_MAX_SEQ];
    if (swa && c->seq) seq_pos_maxes(c, pmax);
    uint32_t n_found = 0, n_tested = 0;
    while (1) {
        if (head_cur + 1 > c->size) {
            n_tested += c->size - head_cur;
            head_cur = 0;
            continue;
        }
        const uint32_t idx = head_cur++;
        n_tested++;
        int can_use = c->pos[idx] < 0;
        if (!can_use && swa
            && is_masked_swa(c->n_swa, c->swa_type, c->pos[idx], c->seq ? pmax[c->seq[idx]] + 1 : p_next))
            can_use = 1;
        if (can_use) idxs[n_found++] = idx;
        if (n_found == n_tokens) return 0;
        if (n_tested >= c->size) return -1;
    }
}

void bk_kv_seq_rm(bk_kv_cells *c, int32_t p0, int32_t p1) {
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT32_MAX;
    uint32_t new_head = c->size;
    for (uint32_t i = 0; i < c->size; i++) {
        const int32_t p = c->pos[i];
        if (p < 0 || p < p0 || p >= p1) continue;
        c->pos[i] = -1;
        c->used--;
        if (new_head == c->size) new_head = i;
    }
    if (new_head != c->size && new_head < c->head) c->head = new_head;
}

void bk_kv_seq_add(bk_kv_cells *c, int32_t p0, int32_t p1, int32_t delta, int32_t *shift) {
    /* src/llama-kv-cache.cpp seq_add (b11192): nothing for a zero shift or an empty range */
    if (delta == 0) return;
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT32_MAX;
    if (p0 == p1) return;
    uint32_t new_head = c->size;
    for (uint32_t i = 0; i < c->size; i++) {
        const int32_t p = c->pos[i];
        if (p < 0 || p < p0 || p >= p1) continue;
        c->pos[i] = p + delta;
        if (shift) shift[i] += delta;
        if (c->pos[i] < 0) {  /* llama-kv-cells.h pos_add: the cell leaves the sequence */
            c->pos[i] = -1;
            if (shift) shift[i] = 0;
            c->used--;
            if (new_head == c->size) new_head = i;
        }
    }
    c->head = new_head != c->size ? new_head : 0;
}

void bk_kv_apply_ubatch(bk_kv_cells *c, const uint32_t *idxs, const int32_t *pos, uint32_t n_tokens) {
    int32_t pos_max_rm = -1;
    for (uint32_t i = 0; i < n_tokens; i++) {
        const uint32_t idx = idxs[i];
        if (c->pos[idx] >= 0) {
            if (c->pos[idx] > pos_max_rm) pos_max_rm = c->pos[idx];
            c->pos[idx] = -1;
            c->used--;
        }
        c->pos[idx] = pos[i];
        c->used++;
    }
    /* keep [pos_min, pos_max] contiguous: drop every position below the highest one overwritten */
    if (pos_max_rm >= 0) {
        const int32_t pmin = bk_kv_seq_pos_min(c);
        if (pmin <= pos_max_rm) bk_kv_seq_rm(c, pmin, pos_max_rm + 1);
    }
    if (n_tokens > 0) c->head = idxs[n_tokens - 1] + 1;
}

void bk_kv_mask_f16(const bk_kv_cells *c, const int32_t *pos, uint32_t n_tokens, uint32_t n_kv, uint16_t *mask,
                    int64_t mask_row, int ith, int nth) {
    const int swa = c->swa_type != BK_SWA_NONE;
    for (uint32_t t = (uint32_t)ith; t < n_tokens; t += (uint32_t)nth) {
        const int32_t p1 = pos[t];
        uint16_t *row = mask + (int64_t)t * mask_row;
        for (uint32_t j = 0; j < n_kv; j++) {
            const int32_t p0 = c->pos[j];
            int drop = p0 < 0 || p0 > p1;
            if (!drop && swa) drop = is_masked_swa(c->n_swa, c->swa_type, p0, p1);
            row[j] = drop ? MASK_DROP : 0;
        }
    }
}

/* ---- unified cache */

void bk_kvu_apply_ubatch(bk_kv_cells *c, const uint32_t *idxs, const int32_t *pos, const int32_t *seq,
                         uint32_t n_tokens) {
    /* a cell bk_kv_find_slot gave that is not empty (a window's): the highest position overwritten per sequence */
    int32_t pos_max_rm[BK_KV_MAX_SEQ];
    int any_rm = 0;
    for (uint32_t i = 0; i < n_tokens; i++) {
        const uint32_t idx = idxs[i];
        if (c->pos[idx] < 0) {
            c->used++;
        } else {
            if (!any_rm)
                for (int s = 0; s < BK_KV_MAX_SEQ; s++) pos_max_rm[s] = -1;
            any_rm = 1;
            if (c->pos[idx] > pos_max_rm[c->seq[idx]]) pos_max_rm[c->seq[idx]] = c->pos[idx];
        }
        c->pos[idx] = pos[i];
        c->seq[idx] = seq[i];
    }
    /* as bk_kv_apply_ubatch, per sequence: drop its positions below the highest one overwritten */
    for (int s = 0; any_rm && s < BK_KV_MAX_SEQ; s++) {
        if (pos_max_rm[s] < 0) continue;
        const int32_t pmin = bk_kvu_seq_pos_min(c, s);
        if (pmin >= 0 && pmin <= pos_max_rm[s]) bk_kvu_seq_rm(c, s, pmin, pos_max_rm[s] + 1);
    }
    if (n_tokens > 0) c->head = idxs[n_tokens - 1] + 1;
}

void bk_kvu_seq_rm(bk_kv_cells *c, int32_t seq, int32_t p0, int32_t p1) {
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT32_MAX;
    uint32_t new_head = c->size;
    for (uint32_t i = 0; i < c->size; i++) {
        const int32_t p = c->pos[i];
        if (p < 0 || p < p0 || p >= p1 || (seq >= 0 && c->seq[i] != seq)) continue;
        c->pos[i] = -1;
        c->seq[i] = -1;
        c->used--;
        if (new_head == c->size) new_head = i;
    }
    if (new_head != c->size && new_head < c->head) c->head = new_head;
}

int32_t bk_kvu_seq_pos_min(const bk_kv_cells *c, int32_t seq) {
    int32_t m = -1;
    for (uint32_t i = 0; i < c->size; i++)
        if (c->pos[i] >= 0 && c->seq[i] == seq && (m < 0 || c->pos[i] < m)) m = c->pos[i];
    return m;
}

int32_t bk_kvu_seq_pos_max(const bk_kv_cells *c, int32_t seq) {
    int32_t m = -1;
    for (uint32_t i = 0; i < c->size; i++)
        if (c->seq[i] == seq && c->pos[i] > m) m = c->pos[i];
    return m;
}

void bk_kvu_mask_f16(const bk_kv_cells *c, const int32_t *pos, const int32_t *seq, uint32_t n_tokens, uint32_t n_kv,
                     uint16_t *mask, int64_t mask_row, int ith, int nth) {
    const int swa = c->swa_type != BK_SWA_NONE;
    for (uint32_t t = (uint32_t)ith; t < n_tokens; t += (uint32_t)nth) {
        const int32_t p1 = pos[t], s = seq[t];
        uint16_t *row = mask + (int64_t)t * mask_row;
        for (uint32_t j = 0; j < n_kv; j++) {
            const int32_t p0 = c->pos[j];
            int drop = p0 < 0 || c->seq[j] != s || p0 > p1;
            if (!drop && swa) drop = is_masked_swa(c->n_swa, c->swa_type, p0, p1);
            row[j] = drop ? MASK_DROP : 0;
        }
    }
}

void bk_kv_store_f16(const float *x, int64_t x_row, uint32_t n_tokens, uint32_t n, const uint32_t *idxs,
                     uint16_t *cache, int64_t cache_row, int ith, int nth) {
    for (uint32_t t = (uint32_t)ith; t < n_tokens; t += (uint32_t)nth)
        bk_fp32_to_fp16_row(x + (int64_t)t * x_row, cache + (int64_t)idxs[t] * cache_row, n);
}

void bk_kv_store_q8_0(const float *x, int64_t x_row, uint32_t n_tokens, uint32_t n, const uint32_t *idxs,
                      uint8_t *cache, int64_t cache_row_bytes, int ith, int nth) {
    for (uint32_t t = (uint32_t)ith; t < n_tokens; t += (uint32_t)nth)
        bk_quant_row_q8_0(x + (int64_t)t * x_row, cache + (int64_t)idxs[t] * cache_row_bytes, n);
}
