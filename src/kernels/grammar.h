/* Grammar engine: the pushdown-stack semantics of llama.cpp b11192's src/llama-grammar.cpp
 * (llama_grammar_advance_stack, llama_grammar_accept_token, llama_grammar_apply_impl with
 * llama_grammar_reject_candidates), with a different schedule that gives the same answers:
 *
 *   - a stack is interned (id of the stack below + element index of its top), so a set of stacks is a sorted
 *     array of ids and is interned too; the grammar state is (stack-set id, partial UTF-8);
 *   - advancing a stack to its terminals is memoised per stack, and one code point's step from a stack set
 *     (llama_grammar_accept over every stack) is memoised per (set, code point);
 *   - the mask over the whole vocabulary is computed by one walk of a trie of the tokens' code points (tokens
 *     decoded from a fresh UTF-8 state) instead of token by token, and is cached per state; a state in the
 *     middle of a UTF-8 sequence decodes the few tokens that start with continuation bytes one by one;
 *   - a short candidate list (the sampler's single-token check) is answered token by token.
 *
 * Acceptance of a token is "some stack of the state can consume its code points and end where llama.cpp's
 * reject rules accept it" (end of stack: no code point left and no partial sequence; token element: the id
 * matches while code points remain, or no code point and no partial sequence remain; character element: a
 * partial sequence must be completable by the element). Everything is integers: no float order involved.
 *
 * Not thread-safe: one engine is used by one thread at a time (memo tables grow on use).
 */
#ifndef BK_GRAMMAR_H
#define BK_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

enum {
    BK_GR_END = 0, BK_GR_ALT = 1, BK_GR_RULE_REF = 2, BK_GR_CHAR = 3, BK_GR_CHAR_NOT = 4,
    BK_GR_CHAR_RNG_UPPER = 5, BK_GR_CHAR_ALT = 6, BK_GR_CHAR_ANY = 7, BK_GR_TOKEN = 8, BK_GR_TOKEN_NOT = 9,
};

/* error codes (negative returns) */
enum {
    BK_GR_OK = 0,
    BK_GR_ENOMEM = -1,
    BK_GR_EDIVERGE = -2,      /* advancing a stack does not terminate (a left recursion llama.cpp misses) */
    BK_GR_EEMPTY = -3,        /* accepting the piece leaves no stack (llama.cpp throws) */
    BK_GR_EEOG = -4,          /* an end-of-generation token while no stack is complete (llama.cpp aborts) */
    BK_GR_EBADTOKEN = -5,     /* token id outside the vocabulary */
    BK_GR_EMALFORMED = -6,    /* a stack top on an element that cannot be one (bad rules) */
};

typedef struct { uint32_t value; int32_t n_remain; } bk_gr_partial;

typedef struct bk_gr_vocab bk_gr_vocab;
typedef struct bk_gr_engine bk_gr_engine;

/* pieces: concatenated bytes, piece i = pieces[offsets[i] .. offsets[i+1]) (n_vocab + 1 offsets);
 * eog: 1 for end-of-generation tokens. Returns NULL when out of memory. */
bk_gr_vocab *bk_gr_vocab_new(int32_t n_vocab, const uint8_t *pieces, const int64_t *offsets, const uint8_t *eog);
void bk_gr_vocab_free(bk_gr_vocab *v);
int32_t bk_gr_vocab_n_trie_nodes(const bk_gr_vocab *v);

/* elems: (type, value) pairs of every rule one after the other; rule_start[r] = index of rule r's first
 * element. *initial receives the initial state's stack-set id. Returns NULL (and *err) on failure. */
bk_gr_engine *bk_gr_engine_new(const uint32_t *elems, int32_t n_elems, const int32_t *rule_start, int32_t n_rules,
                               int32_t root_rule, const bk_gr_vocab *vocab, int32_t *initial, int *err);
void bk_gr_engine_free(bk_gr_engine *g);

/* 1 if the set holds the empty stack (end of generation allowed) */
int bk_gr_allow_eog(const bk_gr_engine *g, int32_t set);
int32_t bk_gr_set_size(const bk_gr_engine *g, int32_t set);

/* llama_grammar_accept_impl for a token (EOG handling included): new set in *set, new partial in *partial. */
int bk_gr_accept_token(bk_gr_engine *g, int32_t *set, bk_gr_partial *partial, int32_t token);
/* llama_grammar_accept_token with an explicit piece (token elements match `token`). */
int bk_gr_accept_piece(bk_gr_engine *g, int32_t *set, bk_gr_partial *partial, int32_t token,
                       const uint8_t *piece, int64_t len);

/* llama_grammar_apply_impl: logit i = -inf for every rejected candidate i. ids and logits are read with byte
 * strides (so the id / logit fields of an array of {id, logit, p} records can be passed as they are).
 * Returns 0 or an error. */
int bk_gr_apply(bk_gr_engine *g, int32_t set, bk_gr_partial partial, const int32_t *ids, int64_t ids_stride,
                float *logits, int64_t logits_stride, int64_t n);
/* the whole-vocabulary mask of a state (1 bit a token, bit set = allowed); the pointer stays valid until the
 * next call into the engine. NULL on error (*err). */
const uint64_t *bk_gr_mask(bk_gr_engine *g, int32_t set, bk_gr_partial partial, int *err);
/* is one token allowed in a state (same answer as the mask) */
int bk_gr_allowed(bk_gr_engine *g, int32_t set, bk_gr_partial partial, int32_t token);

/* statistics for tests and benchmarks */
typedef struct {
    int64_t n_stacks, n_sets, n_steps, n_masks_computed, n_mask_hits, n_token_checks;
} bk_gr_stats;
void bk_gr_get_stats(const bk_gr_engine *g, bk_gr_stats *out);
/* the stacks of a set, for tests: writes at most cap element-index lists, each prefixed by its depth, bottom
 * to top, into out; returns the number of int32 written, or -(needed) when cap is too small */
int64_t bk_gr_dump_set(const bk_gr_engine *g, int32_t set, int32_t *out, int64_t cap);

#endif
