# src/kernels/grammar.h: the grammar engine (vocabulary trie, rules, stack sets, masks).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

cdef extern from "grammar.h":
    ctypedef struct bk_gr_vocab:
        pass
    ctypedef struct bk_gr_engine:
        pass
    ctypedef struct bk_gr_partial:
        uint32_t value
        int32_t n_remain
    ctypedef struct bk_gr_stats:
        int64_t n_stacks, n_sets, n_steps, n_masks_computed, n_mask_hits, n_token_checks
    int BK_GR_OK, BK_GR_ENOMEM, BK_GR_EDIVERGE, BK_GR_EEMPTY, BK_GR_EEOG, BK_GR_EBADTOKEN, BK_GR_EMALFORMED

    bk_gr_vocab *bk_gr_vocab_new(int32_t n_vocab, const uint8_t *pieces, const int64_t *offsets,
                                 const uint8_t *eog) nogil
    void bk_gr_vocab_free(bk_gr_vocab *v) nogil
    int32_t bk_gr_vocab_n_trie_nodes(const bk_gr_vocab *v) nogil
    bk_gr_engine *bk_gr_engine_new(const uint32_t *elems, int32_t n_elems, const int32_t *rule_start,
                                   int32_t n_rules, int32_t root_rule, const bk_gr_vocab *vocab, int32_t *initial,
                                   int *err) nogil
    void bk_gr_engine_free(bk_gr_engine *g) nogil
    int bk_gr_allow_eog(const bk_gr_engine *g, int32_t set) nogil
    int32_t bk_gr_set_size(const bk_gr_engine *g, int32_t set) nogil
    int bk_gr_accept_token(bk_gr_engine *g, int32_t *set, bk_gr_partial *partial, int32_t token) nogil
    int bk_gr_accept_piece(bk_gr_engine *g, int32_t *set, bk_gr_partial *partial, int32_t token,
                           const uint8_t *piece, int64_t len) nogil
    int bk_gr_apply(bk_gr_engine *g, int32_t set, bk_gr_partial partial, const int32_t *ids, int64_t ids_stride,
                    float *logits, int64_t logits_stride, int64_t n) nogil
    const uint64_t *bk_gr_mask(bk_gr_engine *g, int32_t set, bk_gr_partial partial, int *err) nogil
    int bk_gr_allowed(bk_gr_engine *g, int32_t set, bk_gr_partial partial, int32_t token) nogil
    void bk_gr_get_stats(const bk_gr_engine *g, bk_gr_stats *out) nogil
    int64_t bk_gr_dump_set(const bk_gr_engine *g, int32_t set, int32_t *out, int64_t cap) nogil
