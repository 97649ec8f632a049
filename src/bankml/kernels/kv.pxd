# src/kernels/kv.h: llama.cpp's KV-cache cell rules for one sequence, the KQ mask and the K/V row stores.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t

cdef extern from "kv.h" nogil:
    int BK_SWA_NONE, BK_SWA_STANDARD, BK_SWA_CHUNKED, BK_SWA_SYMMETRIC
    int BK_KV_PAD
    ctypedef struct bk_kv_cells:
        int32_t *pos
        uint32_t size, head, used, n_swa
        int32_t swa_type
        int32_t *seq
    void bk_kv_cells_init(bk_kv_cells *c, int32_t *pos_buf, uint32_t size, uint32_t n_swa, int32_t swa_type)
    void bk_kv_cells_clear(bk_kv_cells *c)
    int bk_kv_find_slot(const bk_kv_cells *c, const int32_t *pos, uint32_t n_tokens, uint32_t *idxs)
    void bk_kv_apply_ubatch(bk_kv_cells *c, const uint32_t *idxs, const int32_t *pos, uint32_t n_tokens)
    void bk_kv_seq_rm(bk_kv_cells *c, int32_t p0, int32_t p1)
    void bk_kv_seq_add(bk_kv_cells *c, int32_t p0, int32_t p1, int32_t delta, int32_t *shift)
    uint32_t bk_kv_used_max_p1(const bk_kv_cells *c)
    int32_t bk_kv_seq_pos_min(const bk_kv_cells *c)
    int32_t bk_kv_seq_pos_max(const bk_kv_cells *c)
    uint32_t bk_kv_n_kv(const bk_kv_cells *c)
    void bk_kv_mask_f16(const bk_kv_cells *c, const int32_t *pos, uint32_t n_tokens, uint32_t n_kv,
                        uint16_t *mask, int64_t mask_row, int ith, int nth)
    void bk_kv_store_f16(const float *x, int64_t x_row, uint32_t n_tokens, uint32_t n, const uint32_t *idxs,
                         uint16_t *cache, int64_t cache_row, int ith, int nth)
    void bk_kv_store_q8_0(const float *x, int64_t x_row, uint32_t n_tokens, uint32_t n, const uint32_t *idxs,
                          uint8_t *cache, int64_t cache_row_bytes, int ith, int nth)
    void bk_kvu_apply_ubatch(bk_kv_cells *c, const uint32_t *idxs, const int32_t *pos, const int32_t *seq,
                             uint32_t n_tokens)
    void bk_kvu_seq_rm(bk_kv_cells *c, int32_t seq, int32_t p0, int32_t p1)
    int32_t bk_kvu_seq_pos_min(const bk_kv_cells *c, int32_t seq)
    int32_t bk_kvu_seq_pos_max(const bk_kv_cells *c, int32_t seq)
    void bk_kvu_mask_f16(const bk_kv_cells *c, const int32_t *pos, const int32_t *seq, uint32_t n_tokens,
                         uint32_t n_kv, uint16_t *mask, int64_t mask_row, int ith, int nth)
