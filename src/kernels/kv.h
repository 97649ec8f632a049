/* The KV cache rules of llama.cpp b11192 for one sequence (llama-server -np 1), and the F16 row store.
 *
 * Which cell a token's K and V land in, how many cells attention iterates over (n_kv) and which of them are
 * masked decide the bits of flash attention, so they mirror src/llama-kv-cache.cpp and llama-kv-cells.h:
 *   - bk_kv_find_slot   `llama_kv_cache::find_slot` with cont = false (what `prepare` uses): start at head
 *                       (or at 0 when head > used + 2*n_tokens), take cells one by one, wrapping at the end;
 *                       a cell is usable when empty, or (SWA caches) when its position is outside the window
 *                       of the sequence's largest position + 1.
 *   - bk_kv_apply_ubatch `apply_ubatch`: overwrite the cells, purge older positions than any overwritten one
 *                       (keeps [pos_min, pos_max] contiguous), head = last cell + 1.
 *   - bk_kv_seq_rm      `seq_rm(seq, p0, p1)`: empty the cells holding positions in [p0, p1) (p1 < 0: to the
 *                       end); head moves back to the first freed cell if that is lower. Data is not cleared.
 *   - bk_kv_n_kv        `get_n_kv` with n_pad 1: min(size, max(256, roundup(used_max_p1, 256))).
 *   - bk_kv_mask_f16    `set_input_kq_mask` (causal, one sequence): 0, or -inf for an empty cell, a later
 *                       position, or a position outside the sliding window (SWA caches).
 * With one sequence, no SWA and the server's usage (append; truncate the tail with seq_rm), cell index ==
 * position always: the cells are filled from 0 and seq_rm(p0, -1) moves head back to p0. SWA caches (Gemma 3's
 * sliding-window layers) reuse cells once positions leave the window, so there cell != position.
 *
 * The cache memory itself belongs to the caller: allocate it zeroed (llama.cpp clears its KV buffer at
 * creation) and never clear it on truncation (llama.cpp does not): the tiled attention path reads masked
 * cells too, so stale contents are part of the arithmetic (they only matter if they are inf or NaN).
 */
#ifndef BK_KV_H
#define BK_KV_H
#include <stddef.h>
#include <stdint.h>

/* llama_swa_type */
enum bk_swa_type {
    BK_SWA_NONE = 0,
    BK_SWA_STANDARD = 1,   /* masked when p1 - p0 >= n_swa (Gemma 3) */
    BK_SWA_CHUNKED = 2,    /* masked when p0 < (p1 / n_swa) * n_swa */
    BK_SWA_SYMMETRIC = 3,  /* masked when |p1 - p0| > n_swa / 2 */
};

#define BK_KV_PAD 256  /* n_kv granularity (llama_kv_cache::get_n_kv, n_pad 1 -> 256) */
#define BK_KV_MAX_SEQ 256  /* LLAMA_MAX_SEQ: a unified cache's sequence ids are 0 .. 255 */

/* One sequence's cells. `pos` is caller-owned memory of `size` int32 (no allocation here). */
typedef struct bk_kv_cells {
    int32_t *pos;      /* [size] position stored in each cell, -1 when empty */
    uint32_t size;     /* number of cells: the context size n_ctx (a multiple of 256) */
    uint32_t head;     /* where the next search starts */
    uint32_t used;     /* non-empty cells */
    uint32_t n_swa;    /* sliding window, 0 for none */
    int32_t swa_type;  /* enum bk_swa_type */
    int32_t *seq;      /* [size] a unified cache's sequence of each cell (-1 when empty; bk_kvu_*), caller-owned;
                        * NULL for a one-sequence cache (bk_kv_cells_init leaves it NULL) */
} bk_kv_cells;

/* Set up an empty cache over pos_buf[size]. */
void bk_kv_cells_init(bk_kv_cells *c, int32_t *pos_buf, uint32_t size, uint32_t n_swa, int32_t swa_type);

/* llama_kv_cache::clear: every cell empty, head 0 (the data is the caller's to clear or not). */
void bk_kv_cells_clear(bk_kv_cells *c);

/* Cells for the n_tokens tokens of a ubatch at positions pos[0..n_tokens): writes idxs[0..n_tokens) and
 * returns 0, or returns -1 when they do not fit (nothing written that matters). Does not change c. */
int bk_kv_find_slot(const bk_kv_cells *c, const int32_t *pos, uint32_t n_tokens, uint32_t *idxs);

/* Record the ubatch in the cells found by bk_kv_find_slot (call before building its mask). */
void bk_kv_apply_ubatch(bk_kv_cells *c, const uint32_t *idxs, const int32_t *pos, uint32_t n_tokens);

/* Empty the cells holding positions p0 <= pos < p1 (p0 < 0: from 0; p1 < 0: no upper bound). */
void bk_kv_seq_rm(bk_kv_cells *c, int32_t p0, int32_t p1);

/* `seq_add(seq, p0, p1, delta)` (llama_kv_cache::seq_add, llama-kv-cells.h pos_add): every cell holding a
 * position in [p0, p1) (p0 < 0: from 0; p1 < 0: no upper bound) moves to position + delta; shift[cell] (caller's
 * int32[size], may be NULL) accumulates delta, the amount its K still has to be re-rotated by. A cell whose
 * position would fall below 0 is emptied (shift 0). head becomes the first cell so freed, or 0 when none was.
 * delta 0 or an empty range change nothing. After it, cell != position: the attention still walks cells in
 * index order and the mask reads each cell's position, as llama.cpp's do. */
void bk_kv_seq_add(bk_kv_cells *c, int32_t p0, int32_t p1, int32_t delta, int32_t *shift);

/* Highest used cell + 1 (0 when empty). */
uint32_t bk_kv_used_max_p1(const bk_kv_cells *c);

/* Smallest / largest position held, -1 when empty. */
int32_t bk_kv_seq_pos_min(const bk_kv_cells *c);
int32_t bk_kv_seq_pos_max(const bk_kv_cells *c);

/* The n_kv attention iterates over after the current ubatch is applied. */
uint32_t bk_kv_n_kv(const bk_kv_cells *c);

/* Rows of the F16 KQ mask for the ubatch at positions pos[0..n_tokens) over cells 0..n_kv-1:
 * mask[t*mask_row + j] = 0 or -inf (0xFC00). Rows t = ith, ith+nth, ... are written by thread ith. */
void bk_kv_mask_f16(const bk_kv_cells *c, const int32_t *pos, uint32_t n_tokens, uint32_t n_kv,
                    uint16_t *mask, int64_t mask_row, int ith, int nth);

/* ---- a unified cache (llama-server -kvu, -np auto: kv_unified, one stream whose cells hold several sequences,
 * each cell one sequence and one position; c->seq set). The search for a ubatch's cells is bk_kv_find_slot's
 * (llama_kv_cache::find_slot with one stream: the ubatch's tokens, whatever their sequences, take the first empty
 * cells from head, one by one, wrapping; head restarts at 0 when more than used + 2*n_tokens cells lie before it;
 * holes left by seq_rm are filled that way). n_kv is bk_kv_n_kv's (the highest used cell of any sequence, padded
 * to 256). A unified SWA cache (Gemma 3's sliding-window layers under -kvu): a cell is also usable when its
 * position is outside the window of its own sequence's largest position + 1, and the mask drops the cells outside
 * each row's window. */

/* Record the ubatch in the cells bk_kv_find_slot found: token t of sequence seq[t] at pos[t]; head moves past the
 * last one. A cell that held a position (a SWA cache's, out of its sequence's window) is overwritten, and that
 * sequence then loses every position up to the highest one overwritten (apply_ubatch's purge, per sequence). */
void bk_kvu_apply_ubatch(bk_kv_cells *c, const uint32_t *idxs, const int32_t *pos, const int32_t *seq,
                         uint32_t n_tokens);

/* llama_memory_seq_rm(seq, p0, p1): empty the cells of sequence seq holding p0 <= pos < p1 (p0 < 0: from 0; p1 < 0:
 * no upper bound); head moves back to the first cell freed when that is below it. seq < 0: every sequence. */
void bk_kvu_seq_rm(bk_kv_cells *c, int32_t seq, int32_t p0, int32_t p1);

/* Smallest / largest position of sequence seq, -1 when it holds none. */
int32_t bk_kvu_seq_pos_min(const bk_kv_cells *c, int32_t seq);
int32_t bk_kvu_seq_pos_max(const bk_kv_cells *c, int32_t seq);

/* The F16 KQ mask of a unified cache (set_input_kq_mask, one stream): row t (sequence seq[t] at pos[t]) keeps cell j
 * when it holds seq[t] at a position <= pos[t] (and, SWA cells, inside the window of pos[t]), else -inf. Rows
 * t = ith, ith+nth, ... by thread ith. */
void bk_kvu_mask_f16(const bk_kv_cells *c, const int32_t *pos, const int32_t *seq, uint32_t n_tokens, uint32_t n_kv,
                     uint16_t *mask, int64_t mask_row, int ith, int nth);

/* SET_ROWS into an F16 cache: cache[idxs[t]*cache_row + i] = f16(x[t*x_row + i]) for i < n, round to
 * nearest even (ggml_cpu_fp32_to_fp16). K goes in after RoPE, V as is. Token rows are split over threads. */
void bk_kv_store_f16(const float *x, int64_t x_row, uint32_t n_tokens, uint32_t n, const uint32_t *idxs,
                     uint16_t *cache, int64_t cache_row, int ith, int nth);

/* SET_ROWS into a Q8_0 cache: row t of x (n floats, n % 32 == 0) quantized by quantize_row_q8_0 (x86, as
 * ggml's from_float for Q8_0) into the n/32 blocks of 34 bytes at cache + idxs[t]*cache_row_bytes. */
void bk_kv_store_q8_0(const float *x, int64_t x_row, uint32_t n_tokens, uint32_t n, const uint32_t *idxs,
                      uint8_t *cache, int64_t cache_row_bytes, int ith, int nth);

#endif
