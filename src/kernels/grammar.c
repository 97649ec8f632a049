/* Grammar engine; see grammar.h for what it mirrors and how. */
#include "grammar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ADVANCE_LIMIT 1000000  /* stacks one advance may visit before the grammar is called divergent */
#define SMALL_APPLY 32         /* candidate lists up to this size are checked token by token */

/* ------------------------------------------------------------------------------------------------------------
 * growable arrays and an open-addressing hash map (uint64 key -> int32 value)
 * ---------------------------------------------------------------------------------------------------------- */

typedef struct { int32_t *a; int64_t n, cap; } ivec;
typedef struct { int64_t *a; int64_t n, cap; } lvec;
typedef struct { uint32_t *a; int64_t n, cap; } uvec;

static int grow(void **a, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *na = realloc(*a, (size_t)nc * elem);
    if (!na) return -1;
    *a = na;
    *cap = nc;
    return 0;
}
static int iv_push(ivec *v, int32_t x) {
    if (grow((void **)&v->a, &v->cap, v->n + 1, sizeof(int32_t))) return -1;
    v->a[v->n++] = x;
    return 0;
}
static int lv_push(lvec *v, int64_t x) {
    if (grow((void **)&v->a, &v->cap, v->n + 1, sizeof(int64_t))) return -1;
    v->a[v->n++] = x;
    return 0;
}
static int uv_push(uvec *v, uint32_t x) {
    if (grow((void **)&v->a, &v->cap, v->n + 1, sizeof(uint32_t))) return -1;
    v->a[v->n++] = x;
    return 0;
}

#define HM_EMPTY UINT64_MAX
typedef struct { uint64_t *keys; int32_t *vals; int64_t cap, n; } hmap;

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}
static int hm_init(hmap *m, int64_t cap) {
    m->cap = cap;
    m->n = 0;
    m->keys = malloc((size_t)cap * sizeof(uint64_t));
    m->vals = malloc((size_t)cap * sizeof(int32_t));
    if (!m->keys || !m->vals) return -1;
    memset(m->keys, 0xff, (size_t)cap * sizeof(uint64_t));
    return 0;
}
static void hm_free(hmap *m) { free(m->keys); free(m->vals); m->keys = NULL; m->vals = NULL; }
static void hm_clear(hmap *m) { memset(m->keys, 0xff, (size_t)m->cap * sizeof(uint64_t)); m->n = 0; }
static int32_t hm_get(const hmap *m, uint64_t key) {
    uint64_t mask = (uint64_t)m->cap - 1, i = mix64(key) & mask;
    for (;;) {
        uint64_t k = m->keys[i];
        if (k == key) return m->vals[i];
        if (k == HM_EMPTY) return -1;
        i = (i + 1) & mask;
    }
}
static int hm_put(hmap *m, uint64_t key, int32_t val) {
    if ((m->n + 1) * 2 > m->cap) {
        hmap big;
        if (hm_init(&big, m->cap * 2)) { hm_free(&big); return -1; }
        for (int64_t i = 0; i < m->cap; i++) {
            if (m->keys[i] != HM_EMPTY) hm_put(&big, m->keys[i], m->vals[i]);
        }
        hm_free(m);
        *m = big;
    }
    uint64_t mask = (uint64_t)m->cap - 1, i = mix64(key) & mask;
    while (m->keys[i] != HM_EMPTY && m->keys[i] != key) i = (i + 1) & mask;
    if (m->keys[i] == HM_EMPTY) m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

/* ------------------------------------------------------------------------------------------------------------
 * UTF-8 as llama_grammar's decode_utf8(piece, partial) reads it: C-string semantics (stops at a NUL byte),
 * continuation bytes of a new sequence are not checked, an unexpected continuation byte makes the whole piece
 * invalid (no code point, n_remain = -1).
 * ---------------------------------------------------------------------------------------------------------- */

static const int8_t UTF8_LEN[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};

/* cps must hold len code points; returns their count */
static int64_t decode_piece(const uint8_t *s, int64_t len, bk_gr_partial start, uint32_t *cps, bk_gr_partial *end) {
    int64_t pos = 0, n = 0;
    uint32_t value = start.value;
    int n_remain = start.n_remain;
    while (pos < len && s[pos] != 0 && n_remain > 0) {
        uint8_t b = s[pos];
        if ((b >> 6) != 2) {
            end->value = 0;
            end->n_remain = -1;
            return 0;
        }
        value = (value << 6) + (b & 0x3F);
        pos++;
        n_remain--;
    }
    if (start.n_remain > 0 && n_remain == 0) cps[n++] = value;
    while (pos < len && s[pos] != 0) {
        uint8_t first = s[pos];
        n_remain = UTF8_LEN[first >> 4] - 1;
        if (n_remain < 0) {
            end->value = 0;
            end->n_remain = n_remain;
            return 0;
        }
        uint8_t mask = (uint8_t)((1 << (7 - n_remain)) - 1);
        value = first & mask;
        pos++;
        while (pos < len && s[pos] != 0 && n_remain > 0) {
            value = (value << 6) + (s[pos] & 0x3F);
            pos++;
            n_remain--;
        }
        if (n_remain == 0) cps[n++] = value;
    }
    end->value = value;
    end->n_remain = n_remain;
    return n;
}

/* the candidate's code points as llama_grammar_reject_candidates walks them: up to the first zero value */
static int64_t until_zero(const uint32_t *cps, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (cps[i] == 0) return i;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------------------------
 * vocabulary: pieces, fresh decodes, and a trie of the fresh code points
 * ---------------------------------------------------------------------------------------------------------- */

enum { TOK_TRIE = 0, TOK_EOG = 1, TOK_DEAD = 2, TOK_INVALID = 3 };

struct bk_gr_vocab {
    int32_t n_vocab;
    int32_t n_words;          /* 64-bit words of a mask */
    uint8_t *pieces;
    int64_t *offsets;
    uint8_t *cls;             /* TOK_* */
    /* fresh decode of every piece: cps[cp_off[i] .. cp_off[i] + cp_n[i]) (cut at the first zero), final */
    uint32_t *cps;
    int64_t *cp_off;
    int32_t *cp_n;
    bk_gr_partial *final;
    /* tokens whose piece starts with a continuation byte: the only ones that can follow a partial state */
    int32_t *cont;
    int32_t n_cont;
    /* trie, nodes in preorder; node 0 is the root */
    int32_t n_nodes;
    uint32_t *node_cp;        /* code point on the edge from the parent */
    int32_t *first_child, *next_sibling;
    int32_t *lo, *n_end, *hi; /* tokens in order[lo, hi) are in the subtree; the first n_end end at the node */
    int32_t *order;           /* trie tokens sorted by code points */
    /* the walk's compact copy: a record per node, its children's edges contiguous, finals in token order */
    struct bk_gr_node { int32_t lo, n_end, hi, edge_off, n_edge; } *nodes;
    struct bk_gr_edge { uint32_t cp; int32_t child; } *edges;
    bk_gr_partial *ord_final;
    int32_t *pos_of;          /* index in order, or -1 */
};

static const uint32_t *g_sort_cps;
static const int64_t *g_sort_off;
static const int32_t *g_sort_n;
static int cmp_tokens(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const uint32_t *p = g_sort_cps + g_sort_off[x], *q = g_sort_cps + g_sort_off[y];
    int32_t nx = g_sort_n[x], ny = g_sort_n[y];
    int32_t m = nx < ny ? nx : ny;
    for (int32_t i = 0; i < m; i++) {
        if (p[i] != q[i]) return p[i] < q[i] ? -1 : 1;
    }
    if (nx != ny) return nx < ny ? -1 : 1;
    return x < y ? -1 : (x > y);
}

void bk_gr_vocab_free(bk_gr_vocab *v) {
    if (!v) return;
    free(v->pieces); free(v->offsets); free(v->cls); free(v->cps); free(v->cp_off); free(v->cp_n);
    free(v->final); free(v->cont); free(v->node_cp); free(v->first_child); free(v->next_sibling);
    free(v->lo); free(v->n_end); free(v->hi); free(v->order); free(v->pos_of);
    free(v->nodes); free(v->edges); free(v->ord_final);
    free(v);
}

int32_t bk_gr_vocab_n_trie_nodes(const bk_gr_vocab *v) { return v->n_nodes; }

bk_gr_vocab *bk_gr_vocab_new(int32_t n_vocab, const uint8_t *pieces, const int64_t *offsets, const uint8_t *eog) {
    bk_gr_vocab *v = calloc(1, sizeof(*v));
    if (!v) return NULL;
    int64_t total = offsets[n_vocab];
    v->n_vocab = n_vocab;
    v->n_words = (n_vocab + 63) / 64;
    v->pieces = malloc((size_t)(total ? total : 1));
    v->offsets = malloc((size_t)(n_vocab + 1) * sizeof(int64_t));
    v->cls = malloc((size_t)n_vocab);
    v->cps = malloc((size_t)(total ? total : 1) * sizeof(uint32_t));
    v->cp_off = malloc((size_t)n_vocab * sizeof(int64_t));
    v->cp_n = malloc((size_t)n_vocab * sizeof(int32_t));
    v->final = malloc((size_t)n_vocab * sizeof(bk_gr_partial));
    v->cont = malloc((size_t)n_vocab * sizeof(int32_t));
    v->pos_of = malloc((size_t)n_vocab * sizeof(int32_t));
    v->order = malloc((size_t)n_vocab * sizeof(int32_t));
    if (!v->pieces || !v->offsets || !v->cls || !v->cps || !v->cp_off || !v->cp_n || !v->final || !v->cont ||
        !v->pos_of || !v->order) {
        bk_gr_vocab_free(v);
        return NULL;
    }
    memcpy(v->pieces, pieces, (size_t)total);
    memcpy(v->offsets, offsets, (size_t)(n_vocab + 1) * sizeof(int64_t));

    int64_t cp_used = 0;
    int32_t n_order = 0;
    bk_gr_partial fresh = {0, 0};
    for (int32_t i = 0; i < n_vocab; i++) {
        const uint8_t *p = v->pieces + offsets[i];
        int64_t len = offsets[i + 1] - offsets[i];
        v->cp_off[i] = cp_used;
        v->cp_n[i] = 0;
        v->final[i].value = 0;
        v->final[i].n_remain = 0;
        v->pos_of[i] = -1;
        if (eog[i]) {
            v->cls[i] = TOK_EOG;
            continue;
        }
        if (len == 0 || p[0] == 0) {
            v->cls[i] = TOK_DEAD;
            continue;
        }
        if ((p[0] >> 6) == 2) v->cont[v->n_cont++] = i;
        int64_t n = decode_piece(p, len, fresh, v->cps + cp_used, &v->final[i]);
        n = until_zero(v->cps + cp_used, n);
        v->cp_n[i] = (int32_t)n;
        cp_used += n;
        if (v->final[i].n_remain < 0) {
            v->cls[i] = TOK_INVALID;
            continue;
        }
        v->cls[i] = TOK_TRIE;
        v->order[n_order++] = i;
    }

    g_sort_cps = v->cps;
    g_sort_off = v->cp_off;
    g_sort_n = v->cp_n;
    qsort(v->order, (size_t)n_order, sizeof(int32_t), cmp_tokens);

    /* nodes from the sorted list: the path of the previous token is kept on a stack */
    int64_t cap = cp_used + 1;
    v->node_cp = malloc((size_t)cap * sizeof(uint32_t));
    v->first_child = malloc((size_t)cap * sizeof(int32_t));
    v->next_sibling = malloc((size_t)cap * sizeof(int32_t));
    v->lo = malloc((size_t)cap * sizeof(int32_t));
    v->n_end = malloc((size_t)cap * sizeof(int32_t));
    v->hi = malloc((size_t)cap * sizeof(int32_t));
    int32_t *path = malloc((size_t)cap * sizeof(int32_t));
    int32_t *last_child = malloc((size_t)cap * sizeof(int32_t));
    if (!v->node_cp || !v->first_child || !v->next_sibling || !v->lo || !v->n_end || !v->hi || !path ||
        !last_child) {
        free(path); free(last_child);
        bk_gr_vocab_free(v);
        return NULL;
    }
    int32_t n_nodes = 1, depth = 0;
    v->node_cp[0] = 0;
    v->first_child[0] = v->next_sibling[0] = last_child[0] = -1;
    v->lo[0] = 0;
    v->n_end[0] = 0;
    path[0] = 0;
    int32_t prev = -1;
    for (int32_t k = 0; k < n_order; k++) {
        int32_t t = v->order[k];
        const uint32_t *c = v->cps + v->cp_off[t];
        int32_t n = v->cp_n[t];
        int32_t lcp = 0;
        if (prev >= 0) {
            const uint32_t *pc = v->cps + v->cp_off[prev];
            int32_t pn = v->cp_n[prev];
            while (lcp < n && lcp < pn && c[lcp] == pc[lcp]) lcp++;
        }
        while (depth > lcp) {
            v->hi[path[depth]] = k;
            depth--;
        }
        while (depth < n) {
            int32_t node = n_nodes++;
            int32_t parent = path[depth];
            v->node_cp[node] = c[depth];
            v->first_child[node] = v->next_sibling[node] = last_child[node] = -1;
            v->lo[node] = k;
            v->n_end[node] = 0;
            if (last_child[parent] < 0) v->first_child[parent] = node;
            else v->next_sibling[last_child[parent]] = node;
            last_child[parent] = node;
            path[++depth] = node;
        }
        v->n_end[path[depth]]++;
        v->pos_of[t] = k;
        prev = t;
    }
    while (depth >= 0) {
        v->hi[path[depth]] = n_order;
        depth--;
    }
    v->n_nodes = n_nodes;
    free(path);
    free(last_child);
    v->nodes = malloc((size_t)n_nodes * sizeof(*v->nodes));
    v->edges = malloc((size_t)(n_nodes ? n_nodes : 1) * sizeof(*v->edges));
    v->ord_final = malloc((size_t)(n_order ? n_order : 1) * sizeof(bk_gr_partial));
    if (!v->nodes || !v->edges || !v->ord_final) {
        bk_gr_vocab_free(v);
        return NULL;
    }
    int32_t n_edges = 0;
    for (int32_t node = 0; node < n_nodes; node++) {
        v->nodes[node].lo = v->lo[node];
        v->nodes[node].n_end = v->n_end[node];
        v->nodes[node].hi = v->hi[node];
        v->nodes[node].edge_off = n_edges;
        for (int32_t c = v->first_child[node]; c >= 0; c = v->next_sibling[c]) {
            v->edges[n_edges].cp = v->node_cp[c];
            v->edges[n_edges].child = c;
            n_edges++;
        }
        v->nodes[node].n_edge = n_edges - v->nodes[node].edge_off;
    }
    for (int32_t k = 0; k < n_order; k++) v->ord_final[k] = v->final[v->order[k]];
    return v;
}

/* ------------------------------------------------------------------------------------------------------------
 * engine: interned stacks and stack sets, memoised advance and step
 * ---------------------------------------------------------------------------------------------------------- */

enum { SET_EMPTY_STACK = 1, SET_TOKEN_TOP = 2, SET_CHAR_TOP = 4 };

struct bk_gr_engine {
    const bk_gr_vocab *v;
    uint32_t *type, *value;
    int32_t n_elems;
    int32_t *rule_start;
    int32_t n_rules;
    /* stacks: id 0 is the empty stack */
    ivec st_parent, st_pos, adv_memo, seen, mark;
    hmap st_map;
    int32_t seen_gen, mark_gen;
    /* stack sets: id 0 is the empty set */
    ivec set_data;
    lvec set_off;
    ivec set_len, set_flags;
    int32_t *set_tab;         /* open addressing over set ids, -1 empty */
    int64_t set_tab_cap;
    /* memo of steps: (set, signature) -> set through sig_map (hash -> entry), or (set, code point) -> set */
    hmap step_map, sig_map;
    ivec sig_set, sig_lo, sig_hi, sig_res;
    ivec ascii_tab, ascii_pool;   /* per set: offset of its 128 ASCII step results (-1: none yet) */
    /* scratch */
    ivec work, adv_out, step_out, tmp;
    uvec cp_buf;
    /* mask cache */
    hmap mask_map;
    uint64_t *masks;
    int32_t n_mask_slots, next_mask_slot;
    /* DFS scratch */
    ivec dfs;
    bk_gr_stats stats;
};

static int eos_at(const bk_gr_engine *g, int32_t pos) {
    return g->type[pos] == BK_GR_END || g->type[pos] == BK_GR_ALT;
}

static int32_t intern_stack(bk_gr_engine *g, int32_t parent, int32_t pos) {
    uint64_t key = ((uint64_t)(uint32_t)(parent + 1) << 32) | (uint32_t)pos;
    int32_t id = hm_get(&g->st_map, key);
    if (id >= 0) return id;
    id = (int32_t)g->st_parent.n;
    if (iv_push(&g->st_parent, parent) || iv_push(&g->st_pos, pos) || iv_push(&g->adv_memo, -1) ||
        iv_push(&g->seen, 0) || iv_push(&g->mark, 0) || hm_put(&g->st_map, key, id))
        return BK_GR_ENOMEM;
    g->stats.n_stacks++;
    return id;
}

static uint64_t hash_ids(const int32_t *a, int64_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    for (int64_t i = 0; i < n; i++) h = mix64(h ^ (uint64_t)(uint32_t)a[i]) + 0x632be59bd9b4e019ULL;
    return h;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void sort_ids(int32_t *a, int64_t n) {
    if (n < 24) {
        for (int64_t i = 1; i < n; i++) {
            int32_t x = a[i];
            int64_t j = i - 1;
            while (j >= 0 && a[j] > x) { a[j + 1] = a[j]; j--; }
            a[j + 1] = x;
        }
    } else {
        qsort(a, (size_t)n, sizeof(int32_t), cmp_i32);
    }
}

static int set_tab_insert(bk_gr_engine *g, int32_t id);

static int set_tab_grow(bk_gr_engine *g) {
    int64_t nc = g->set_tab_cap * 2;
    int32_t *nt = malloc((size_t)nc * sizeof(int32_t));
    if (!nt) return -1;
    free(g->set_tab);
    g->set_tab = nt;
    g->set_tab_cap = nc;
    for (int64_t i = 0; i < nc; i++) nt[i] = -1;
    for (int32_t id = 0; id < (int32_t)g->set_len.n; id++) set_tab_insert(g, id);
    return 0;
}

static int set_tab_insert(bk_gr_engine *g, int32_t id) {
    uint64_t mask = (uint64_t)g->set_tab_cap - 1;
    uint64_t i = hash_ids(g->set_data.a + g->set_off.a[id], g->set_len.a[id]) & mask;
    while (g->set_tab[i] >= 0) i = (i + 1) & mask;
    g->set_tab[i] = id;
    return 0;
}

/* the id of the set holding ids[0..n) (sorted here; duplicates must not be present) */
static int32_t intern_set(bk_gr_engine *g, int32_t *ids, int64_t n) {
    sort_ids(ids, n);
    uint64_t mask = (uint64_t)g->set_tab_cap - 1;
    uint64_t i = hash_ids(ids, n) & mask;
    for (;;) {
        int32_t id = g->set_tab[i];
        if (id < 0) break;
        if (g->set_len.a[id] == n && memcmp(g->set_data.a + g->set_off.a[id], ids, (size_t)n * sizeof(int32_t)) == 0)
            return id;
        i = (i + 1) & mask;
    }
    int32_t id = (int32_t)g->set_len.n;
    int32_t flags = 0;
    for (int64_t k = 0; k < n; k++) {
        int32_t s = ids[k];
        if (s == 0) { flags |= SET_EMPTY_STACK; continue; }
        uint32_t t = g->type[g->st_pos.a[s]];
        flags |= (t == BK_GR_TOKEN || t == BK_GR_TOKEN_NOT) ? SET_TOKEN_TOP : SET_CHAR_TOP;
    }
    if (lv_push(&g->set_off, g->set_data.n) || iv_push(&g->set_len, (int32_t)n) || iv_push(&g->set_flags, flags) ||
        iv_push(&g->ascii_tab, -1))
        return BK_GR_ENOMEM;
    for (int64_t k = 0; k < n; k++) {
        if (iv_push(&g->set_data, ids[k])) return BK_GR_ENOMEM;
    }
    g->set_tab[i] = id;
    g->stats.n_sets++;
    if ((g->set_len.n + 1) * 2 > g->set_tab_cap && set_tab_grow(g)) return BK_GR_ENOMEM;
    return id;
}

/* llama_grammar_advance_stack on one stack: the set of stacks whose top is a terminal (or that are empty) */
static int32_t advance(bk_gr_engine *g, int32_t stack) {
    int32_t memo = g->adv_memo.a[stack];
    if (memo >= 0) return memo;
    int32_t gen = ++g->seen_gen;
    int32_t out_gen = ++g->mark_gen;
    g->work.n = 0;
    g->adv_out.n = 0;
    if (iv_push(&g->work, stack)) return BK_GR_ENOMEM;
    int64_t visited = 0;
    while (g->work.n) {
        int32_t cur = g->work.a[--g->work.n];
        if (g->seen.a[cur] == gen) continue;
        g->seen.a[cur] = gen;
        if (++visited > ADVANCE_LIMIT) return BK_GR_EDIVERGE;
        if (cur == 0) {
            if (g->mark.a[0] != out_gen) { g->mark.a[0] = out_gen; if (iv_push(&g->adv_out, 0)) return BK_GR_ENOMEM; }
            continue;
        }
        int32_t pos = g->st_pos.a[cur];
        uint32_t t = g->type[pos];
        if (t == BK_GR_RULE_REF) {
            int32_t sub = g->rule_start[g->value[pos]];
            int32_t below = g->st_parent.a[cur];
            for (;;) {
                int32_t ns = below;
                if (!eos_at(g, pos + 1)) {
                    ns = intern_stack(g, ns, pos + 1);
                    if (ns < 0) return ns;
                }
                if (!eos_at(g, sub)) {
                    ns = intern_stack(g, ns, sub);
                    if (ns < 0) return ns;
                }
                if (iv_push(&g->work, ns)) return BK_GR_ENOMEM;
                while (!eos_at(g, sub)) sub++;
                if (g->type[sub] == BK_GR_ALT) sub++;
                else break;
            }
        } else if (t == BK_GR_CHAR || t == BK_GR_CHAR_NOT || t == BK_GR_CHAR_ANY || t == BK_GR_TOKEN ||
                   t == BK_GR_TOKEN_NOT) {
            if (g->mark.a[cur] != out_gen) {
                g->mark.a[cur] = out_gen;
                if (iv_push(&g->adv_out, cur)) return BK_GR_ENOMEM;
            }
        } else {
            return BK_GR_EMALFORMED;
        }
    }
    int32_t set = intern_set(g, g->adv_out.a, g->adv_out.n);
    if (set < 0) return set;
    g->adv_memo.a[stack] = set;
    return set;
}

/* llama_grammar_match_char: does chr match the character class at pos; *after = element after the class */
static int match_char(const bk_gr_engine *g, int32_t pos, uint32_t chr, int32_t *after) {
    uint32_t t = g->type[pos];
    int positive = t == BK_GR_CHAR || t == BK_GR_CHAR_ANY;
    int found = 0;
    do {
        if (g->type[pos + 1] == BK_GR_CHAR_RNG_UPPER) {
            found = found || (g->value[pos] <= chr && chr <= g->value[pos + 1]);
            pos += 2;
        } else if (g->type[pos] == BK_GR_CHAR_ANY) {
            found = 1;
            pos += 1;
        } else {
            found = found || g->value[pos] == chr;
            pos += 1;
        }
    } while (g->type[pos] == BK_GR_CHAR_ALT);
    *after = pos;
    return found == positive;
}

/* llama_grammar_match_partial_char: can some completion of the partial sequence match the class at pos */
static int match_partial_char(const bk_gr_engine *g, int32_t pos, bk_gr_partial p) {
    uint32_t t = g->type[pos];
    int positive = t == BK_GR_CHAR || t == BK_GR_CHAR_ANY;
    uint32_t pv = p.value;
    int n_remain = p.n_remain;
    if (n_remain < 0 || (n_remain == 1 && pv < 2)) return 0;
    uint32_t low = pv << (n_remain * 6);
    uint32_t high = low | ((1u << (n_remain * 6)) - 1);
    if (low == 0) {
        if (n_remain == 2) low = 1u << 11;
        else if (n_remain == 3) low = 1u << 16;
    }
    do {
        if (g->type[pos + 1] == BK_GR_CHAR_RNG_UPPER) {
            if (g->value[pos] <= high && low <= g->value[pos + 1]) return positive;
            pos += 2;
        } else if (g->type[pos] == BK_GR_CHAR_ANY) {
            return 1;
        } else {
            if (low <= g->value[pos] && g->value[pos] <= high) return positive;
            pos += 1;
        }
    } while (g->type[pos] == BK_GR_CHAR_ALT);
    return !positive;
}

static int match_token(const bk_gr_engine *g, int32_t pos, int32_t token) {
    if (g->type[pos] == BK_GR_TOKEN) return g->value[pos] == (uint32_t)token;
    if (g->type[pos] == BK_GR_TOKEN_NOT) return g->value[pos] != (uint32_t)token;
    return 0;
}

/* add every stack of `set` to step_out, without duplicates (mark stamps) */
static int collect(bk_gr_engine *g, int32_t set, int32_t gen) {
    int64_t off = g->set_off.a[set];
    int32_t n = g->set_len.a[set];
    for (int32_t k = 0; k < n; k++) {
        int32_t s = g->set_data.a[off + k];
        if (g->mark.a[s] != gen) {
            g->mark.a[s] = gen;
            if (iv_push(&g->step_out, s)) return BK_GR_ENOMEM;
        }
    }
    return 0;
}

/* one code point accepted by every stack of a set (llama_grammar_accept): the next set.
 *
 * The result depends on the code point only through which char-topped stacks match it (the element after a
 * class does not depend on the character), so it is memoised per (set, signature of matches): a string's
 * content state takes a handful of distinct signatures where it meets thousands of distinct code points.
 * A set with more than 64 char-topped stacks is memoised per (set, code point) instead. */
static int32_t step_slow(bk_gr_engine *g, int32_t set, uint32_t cp);

/* ASCII steps of a set are kept in a small table of their own (most edges of the token trie are ASCII) */
static int32_t step(bk_gr_engine *g, int32_t set, uint32_t cp) {
    if (!(g->set_flags.a[set] & SET_CHAR_TOP)) return 0;
    if (cp >= 128) return step_slow(g, set, cp);
    int32_t tab = g->ascii_tab.a[set];
    if (tab < 0) {
        tab = (int32_t)g->ascii_pool.n;
        if (grow((void **)&g->ascii_pool.a, &g->ascii_pool.cap, g->ascii_pool.n + 128, sizeof(int32_t)))
            return BK_GR_ENOMEM;
        for (int i = 0; i < 128; i++) g->ascii_pool.a[tab + i] = -1;
        g->ascii_pool.n += 128;
        g->ascii_tab.a[set] = tab;
    }
    int32_t r = g->ascii_pool.a[tab + cp];
    if (r >= 0) return r;
    r = step_slow(g, set, cp);
    if (r >= 0) g->ascii_pool.a[g->ascii_tab.a[set] + cp] = r;
    return r;
}

static int32_t step_slow(bk_gr_engine *g, int32_t set, uint32_t cp) {
    int32_t n = g->set_len.a[set];
    int64_t off = g->set_off.a[set];
    uint64_t sig = 0;
    int j = 0, big = 0;
    for (int32_t k = 0; k < n; k++) {
        int32_t s = g->set_data.a[off + k];
        if (s == 0) continue;
        int32_t pos = g->st_pos.a[s];
        uint32_t t = g->type[pos];
        if (t == BK_GR_TOKEN || t == BK_GR_TOKEN_NOT) continue;
        if (j == 64) { big = 1; break; }
        int32_t after;
        if (match_char(g, pos, cp, &after)) sig |= 1ULL << j;
        j++;
    }
    uint64_t key;
    int32_t memo;
    if (big) {
        key = ((uint64_t)(uint32_t)set << 32) | cp;
        memo = hm_get(&g->step_map, key);
        if (memo >= 0) return memo;
    } else {
        if (sig == 0) return 0;
        key = mix64(((uint64_t)(uint32_t)set << 32) ^ mix64(sig));
        if (key == HM_EMPTY) key = 0;
        int32_t e = hm_get(&g->sig_map, key);
        if (e >= 0 && g->sig_set.a[e] == set && (uint64_t)g->sig_lo.a[e] == (sig & 0xFFFFFFFFu) &&
            (uint64_t)(uint32_t)g->sig_hi.a[e] == (sig >> 32))
            return g->sig_res.a[e];
        memo = e;  /* a different (set, signature) with the same hash: computed without a memo */
    }
    /* the stacks reached; advance() reuses work/adv_out, so results are gathered here after each call */
    g->tmp.n = 0;
    for (int32_t k = 0; k < n; k++) {
        int32_t s = g->set_data.a[g->set_off.a[set] + k];
        if (s == 0) continue;
        int32_t pos = g->st_pos.a[s];
        uint32_t t = g->type[pos];
        if (t == BK_GR_TOKEN || t == BK_GR_TOKEN_NOT) continue;
        int32_t after;
        if (!match_char(g, pos, cp, &after)) continue;
        int32_t ns = g->st_parent.a[s];
        if (!eos_at(g, after)) {
            ns = intern_stack(g, ns, after);
            if (ns < 0) return ns;
        }
        int32_t r = advance(g, ns);
        if (r < 0) return r;
        if (iv_push(&g->tmp, r)) return BK_GR_ENOMEM;
    }
    int32_t gen = ++g->mark_gen;
    g->step_out.n = 0;
    for (int64_t k = 0; k < g->tmp.n; k++) {
        int rc = collect(g, g->tmp.a[k], gen);
        if (rc) return rc;
    }
    int32_t res = intern_set(g, g->step_out.a, g->step_out.n);
    if (res < 0) return res;
    if (big) {
        if (hm_put(&g->step_map, key, res)) return BK_GR_ENOMEM;
    } else if (memo < 0) {
        int32_t e = (int32_t)g->sig_set.n;
        if (iv_push(&g->sig_set, set) || iv_push(&g->sig_lo, (int32_t)(uint32_t)(sig & 0xFFFFFFFFu)) ||
            iv_push(&g->sig_hi, (int32_t)(uint32_t)(sig >> 32)) || iv_push(&g->sig_res, res) ||
            hm_put(&g->sig_map, key, e))
            return BK_GR_ENOMEM;
    }
    g->stats.n_steps++;
    return res;
}

/* the set of the char-topped stacks of a set */
static int32_t char_part(bk_gr_engine *g, int32_t set) {
    g->step_out.n = 0;
    int32_t n = g->set_len.a[set];
    for (int32_t k = 0; k < n; k++) {
        int32_t s = g->set_data.a[g->set_off.a[set] + k];
        if (s == 0) continue;
        uint32_t t = g->type[g->st_pos.a[s]];
        if (t == BK_GR_TOKEN || t == BK_GR_TOKEN_NOT) continue;
        if (iv_push(&g->step_out, s)) return BK_GR_ENOMEM;
    }
    return intern_set(g, g->step_out.a, g->step_out.n);
}

void bk_gr_engine_free(bk_gr_engine *g) {
    if (!g) return;
    free(g->type); free(g->value); free(g->rule_start);
    free(g->st_parent.a); free(g->st_pos.a); free(g->adv_memo.a); free(g->seen.a); free(g->mark.a);
    hm_free(&g->st_map);
    free(g->set_data.a); free(g->set_off.a); free(g->set_len.a); free(g->set_flags.a); free(g->set_tab);
    hm_free(&g->step_map);
    hm_free(&g->sig_map);
    free(g->sig_set.a); free(g->sig_lo.a); free(g->sig_hi.a); free(g->sig_res.a);
    free(g->ascii_tab.a); free(g->ascii_pool.a);
    free(g->work.a); free(g->adv_out.a); free(g->step_out.a); free(g->tmp.a); free(g->cp_buf.a);
    hm_free(&g->mask_map);
    free(g->masks);
    free(g->dfs.a);
    free(g);
}

bk_gr_engine *bk_gr_engine_new(const uint32_t *elems, int32_t n_elems, const int32_t *rule_start, int32_t n_rules,
                               int32_t root_rule, const bk_gr_vocab *vocab, int32_t *initial, int *err) {
    *err = BK_GR_ENOMEM;
    bk_gr_engine *g = calloc(1, sizeof(*g));
    if (!g) return NULL;
    g->v = vocab;
    g->n_elems = n_elems;
    g->n_rules = n_rules;
    g->type = malloc((size_t)(n_elems + 1) * sizeof(uint32_t));
    g->value = malloc((size_t)(n_elems + 1) * sizeof(uint32_t));
    g->rule_start = malloc((size_t)(n_rules ? n_rules : 1) * sizeof(int32_t));
    g->set_tab_cap = 1024;
    g->set_tab = malloc((size_t)g->set_tab_cap * sizeof(int32_t));
    int64_t mask_bytes = (int64_t)vocab->n_words * 8;
    int64_t slots = (32LL << 20) / (mask_bytes ? mask_bytes : 1);
    g->n_mask_slots = (int32_t)(slots > 1024 ? 1024 : (slots < 16 ? 16 : slots));
    g->masks = malloc((size_t)g->n_mask_slots * (size_t)mask_bytes);
    if (!g->type || !g->value || !g->rule_start || !g->set_tab || !g->masks || hm_init(&g->st_map, 1024) ||
        hm_init(&g->step_map, 4096) || hm_init(&g->sig_map, 4096) || hm_init(&g->mask_map, 2048)) {
        bk_gr_engine_free(g);
        return NULL;
    }
    for (int32_t i = 0; i < n_elems; i++) {
        g->type[i] = elems[2 * i];
        g->value[i] = elems[2 * i + 1];
    }
    g->type[n_elems] = BK_GR_END;
    g->value[n_elems] = 0;
    memcpy(g->rule_start, rule_start, (size_t)n_rules * sizeof(int32_t));
    for (int64_t i = 0; i < g->set_tab_cap; i++) g->set_tab[i] = -1;
    /* the empty stack and the empty set */
    if (iv_push(&g->st_parent, -1) || iv_push(&g->st_pos, -1) || iv_push(&g->adv_memo, -1) || iv_push(&g->seen, 0) ||
        iv_push(&g->mark, 0)) {
        bk_gr_engine_free(g);
        return NULL;
    }
    int32_t none[1];
    if (intern_set(g, none, 0) != 0) {
        bk_gr_engine_free(g);
        return NULL;
    }
    /* the initial stacks: one per alternate of the root rule, advanced */
    ivec init = {0};
    int32_t pos = rule_start[root_rule];
    for (;;) {
        int32_t s = 0;
        if (!eos_at(g, pos)) s = intern_stack(g, 0, pos);
        int32_t r = s < 0 ? s : advance(g, s);
        if (r < 0) {
            *err = r;
            free(init.a);
            bk_gr_engine_free(g);
            return NULL;
        }
        if (iv_push(&init, r)) { free(init.a); bk_gr_engine_free(g); return NULL; }
        while (!eos_at(g, pos)) pos++;
        if (g->type[pos] == BK_GR_ALT) pos++;
        else break;
    }
    int32_t gen = ++g->mark_gen;
    g->step_out.n = 0;
    for (int64_t k = 0; k < init.n; k++) collect(g, init.a[k], gen);
    free(init.a);
    int32_t set = intern_set(g, g->step_out.a, g->step_out.n);
    if (set < 0) {
        *err = set;
        bk_gr_engine_free(g);
        return NULL;
    }
    *initial = set;
    *err = BK_GR_OK;
    return g;
}

int bk_gr_allow_eog(const bk_gr_engine *g, int32_t set) { return (g->set_flags.a[set] & SET_EMPTY_STACK) != 0; }
int32_t bk_gr_set_size(const bk_gr_engine *g, int32_t set) { return g->set_len.a[set]; }

int bk_gr_accept_piece(bk_gr_engine *g, int32_t *set_io, bk_gr_partial *partial, int32_t token,
                       const uint8_t *piece, int64_t len) {
    int32_t set = *set_io;
    if (grow((void **)&g->cp_buf.a, &g->cp_buf.cap, len + 1, sizeof(uint32_t))) return BK_GR_ENOMEM;
    bk_gr_partial end;
    int64_t n_cp = decode_piece(piece, len, *partial, g->cp_buf.a, &end);
    /* token-topped stacks: advanced past the token when it matches */
    ivec parts = {0};
    int32_t n = g->set_len.a[set];
    for (int32_t k = 0; k < n; k++) {
        int32_t s = g->set_data.a[g->set_off.a[set] + k];
        if (s == 0) continue;
        int32_t pos = g->st_pos.a[s];
        uint32_t t = g->type[pos];
        if (t != BK_GR_TOKEN && t != BK_GR_TOKEN_NOT) continue;
        if (!match_token(g, pos, token)) continue;
        int32_t ns = g->st_parent.a[s];
        if (!eos_at(g, pos + 1)) ns = intern_stack(g, ns, pos + 1);
        int32_t r = ns < 0 ? ns : advance(g, ns);
        if (r < 0 || iv_push(&parts, r)) { free(parts.a); return r < 0 ? r : BK_GR_ENOMEM; }
    }
    /* char-topped stacks: walked through the code points */
    int32_t cur = char_part(g, set);
    for (int64_t i = 0; cur > 0 && i < n_cp; i++) cur = step(g, cur, g->cp_buf.a[i]);
    if (cur < 0 || iv_push(&parts, cur)) { free(parts.a); return cur < 0 ? cur : BK_GR_ENOMEM; }
    int32_t gen = ++g->mark_gen;
    g->step_out.n = 0;
    for (int64_t k = 0; k < parts.n; k++) collect(g, parts.a[k], gen);
    free(parts.a);
    int32_t res = intern_set(g, g->step_out.a, g->step_out.n);
    if (res < 0) return res;
    if (res == 0) return BK_GR_EEMPTY;
    *set_io = res;
    *partial = end;
    return BK_GR_OK;
}

int bk_gr_accept_token(bk_gr_engine *g, int32_t *set, bk_gr_partial *partial, int32_t token) {
    const bk_gr_vocab *v = g->v;
    if (token < 0 || token >= v->n_vocab) return BK_GR_EBADTOKEN;
    if (v->cls[token] == TOK_EOG) return bk_gr_allow_eog(g, *set) ? BK_GR_OK : BK_GR_EEOG;
    return bk_gr_accept_piece(g, set, partial, token, v->pieces + v->offsets[token],
                              v->offsets[token + 1] - v->offsets[token]);
}

/* can some char-topped stack of the set match a completion of the partial UTF-8 sequence */
static int partial_ok(const bk_gr_engine *g, int32_t set, bk_gr_partial fin) {
    if (fin.n_remain <= 0) return 0;
    int32_t n = g->set_len.a[set];
    for (int32_t k = 0; k < n; k++) {
        int32_t s = g->set_data.a[g->set_off.a[set] + k];
        if (s == 0) continue;
        int32_t pos = g->st_pos.a[s];
        uint32_t t = g->type[pos];
        if (t == BK_GR_TOKEN || t == BK_GR_TOKEN_NOT) continue;
        if (match_partial_char(g, pos, fin)) return 1;
    }
    return 0;
}

/* is a candidate with these code points (and final partial sequence) accepted by some stack of the set */
static int check_cps(bk_gr_engine *g, int32_t set, const uint32_t *cps, int64_t n, bk_gr_partial fin, int32_t token) {
    int32_t cur = set;
    for (int64_t i = 0; i < n; i++) {
        if (g->set_flags.a[cur] & SET_TOKEN_TOP) {
            int32_t m = g->set_len.a[cur];
            for (int32_t k = 0; k < m; k++) {
                int32_t s = g->set_data.a[g->set_off.a[cur] + k];
                if (s && match_token(g, g->st_pos.a[s], token)) return 1;
            }
        }
        cur = step(g, cur, cps[i]);
        if (cur < 0) return cur;
        if (cur == 0) return 0;
    }
    if (fin.n_remain == 0) return g->set_len.a[cur] > 0;
    return partial_ok(g, cur, fin);
}

static int fresh(bk_gr_partial p) { return p.n_remain <= 0; }

int bk_gr_allowed(bk_gr_engine *g, int32_t set, bk_gr_partial partial, int32_t token) {
    const bk_gr_vocab *v = g->v;
    if (token < 0 || token >= v->n_vocab) return BK_GR_EBADTOKEN;
    g->stats.n_token_checks++;
    switch (v->cls[token]) {
        case TOK_EOG: return bk_gr_allow_eog(g, set);
        case TOK_DEAD: return 0;
        default: break;
    }
    if (fresh(partial)) {
        if (v->cls[token] == TOK_INVALID) return 0;
        return check_cps(g, set, v->cps + v->cp_off[token], v->cp_n[token], v->final[token], token);
    }
    int64_t len = v->offsets[token + 1] - v->offsets[token];
    if (grow((void **)&g->cp_buf.a, &g->cp_buf.cap, len + 1, sizeof(uint32_t))) return BK_GR_ENOMEM;
    bk_gr_partial fin;
    int64_t n = decode_piece(v->pieces + v->offsets[token], len, partial, g->cp_buf.a, &fin);
    n = until_zero(g->cp_buf.a, n);
    return check_cps(g, set, g->cp_buf.a, n, fin, token);
}

static uint64_t mask_key(int32_t set, bk_gr_partial p) {
    if (fresh(p)) return (uint64_t)(uint32_t)set << 32;
    return ((uint64_t)(uint32_t)set << 32) | ((uint64_t)(p.n_remain & 3) << 30) | (p.value & 0x3FFFFFFF);
}

#define SETBIT(m, t) ((m)[(t) >> 6] |= 1ULL << ((t) & 63))

static int mask_fresh(bk_gr_engine *g, int32_t set, uint64_t *m) {
    const bk_gr_vocab *v = g->v;
    g->dfs.n = 0;
    if (iv_push(&g->dfs, 0) || iv_push(&g->dfs, set)) return BK_GR_ENOMEM;
    while (g->dfs.n) {
        int32_t cur = g->dfs.a[--g->dfs.n];
        int32_t node = g->dfs.a[--g->dfs.n];
        const struct bk_gr_node *nd = &v->nodes[node];
        int32_t lo = nd->lo, ne = nd->n_end, hi = nd->hi;
        /* tokens that end here */
        for (int32_t k = lo; k < lo + ne; k++) {
            int32_t t = v->order[k];
            bk_gr_partial fin = v->ord_final[k];
            if (fin.n_remain == 0 || partial_ok(g, cur, fin)) SETBIT(m, t);
        }
        /* token-topped stacks accept by id any token that goes on below this node */
        if (g->set_flags.a[cur] & SET_TOKEN_TOP) {
            int32_t n = g->set_len.a[cur];
            for (int32_t j = 0; j < n; j++) {
                int32_t s = g->set_data.a[g->set_off.a[cur] + j];
                if (s == 0) continue;
                int32_t pos = g->st_pos.a[s];
                uint32_t ty = g->type[pos];
                if (ty == BK_GR_TOKEN) {
                    int32_t t = (int32_t)g->value[pos];
                    if (t >= 0 && t < v->n_vocab && v->pos_of[t] >= lo + ne && v->pos_of[t] < hi) SETBIT(m, t);
                } else if (ty == BK_GR_TOKEN_NOT) {
                    for (int32_t k = lo + ne; k < hi; k++) {
                        int32_t t = v->order[k];
                        if ((uint32_t)t != g->value[pos]) SETBIT(m, t);
                    }
                }
            }
        }
        const struct bk_gr_edge *e = v->edges + nd->edge_off;
        if (grow((void **)&g->dfs.a, &g->dfs.cap, g->dfs.n + 2 * (int64_t)nd->n_edge, sizeof(int32_t)))
            return BK_GR_ENOMEM;
        for (int32_t i = 0; i < nd->n_edge; i++) {
            int32_t next = step(g, cur, e[i].cp);
            if (next < 0) return next;
            if (next == 0) continue;
            g->dfs.a[g->dfs.n++] = e[i].child;
            g->dfs.a[g->dfs.n++] = next;
        }
    }
    return 0;
}

const uint64_t *bk_gr_mask(bk_gr_engine *g, int32_t set, bk_gr_partial partial, int *err) {
    const bk_gr_vocab *v = g->v;
    uint64_t key = mask_key(set, partial);
    int32_t slot = hm_get(&g->mask_map, key);
    *err = BK_GR_OK;
    if (slot >= 0) {
        g->stats.n_mask_hits++;
        return g->masks + (int64_t)slot * v->n_words;
    }
    if (g->next_mask_slot == g->n_mask_slots) {
        hm_clear(&g->mask_map);
        g->next_mask_slot = 0;
    }
    slot = g->next_mask_slot;
    uint64_t *m = g->masks + (int64_t)slot * v->n_words;
    memset(m, 0, (size_t)v->n_words * 8);
    int rc = 0;
    if (fresh(partial)) {
        rc = mask_fresh(g, set, m);
    } else {
        for (int32_t k = 0; k < v->n_cont && rc >= 0; k++) {
            int32_t t = v->cont[k];
            rc = bk_gr_allowed(g, set, partial, t);
            if (rc > 0) SETBIT(m, t);
        }
        rc = rc < 0 ? rc : 0;
    }
    if (rc < 0) {
        *err = rc;
        return NULL;
    }
    if (bk_gr_allow_eog(g, set)) {
        for (int32_t t = 0; t < v->n_vocab; t++) {
            if (v->cls[t] == TOK_EOG) SETBIT(m, t);
        }
    }
    if (hm_put(&g->mask_map, key, slot)) {
        *err = BK_GR_ENOMEM;
        return NULL;
    }
    g->next_mask_slot++;
    g->stats.n_masks_computed++;
    return m;
}

#define ID_AT(i) (*(const int32_t *)((const char *)ids + (i) * ids_stride))
#define LOGIT_AT(i) (*(float *)((char *)logits + (i) * logits_stride))

int bk_gr_apply(bk_gr_engine *g, int32_t set, bk_gr_partial partial, const int32_t *ids, int64_t ids_stride,
                float *logits, int64_t logits_stride, int64_t n) {
    const bk_gr_vocab *v = g->v;
    for (int64_t i = 0; i < n; i++) {
        if (ID_AT(i) < 0 || ID_AT(i) >= v->n_vocab) return BK_GR_EBADTOKEN;
    }
    int32_t slot = hm_get(&g->mask_map, mask_key(set, partial));
    if (slot < 0 && n <= SMALL_APPLY) {
        for (int64_t i = 0; i < n; i++) {
            int ok = bk_gr_allowed(g, set, partial, ID_AT(i));
            if (ok < 0) return ok;
            if (!ok) LOGIT_AT(i) = -INFINITY;
        }
        return 0;
    }
    int err;
    const uint64_t *m = bk_gr_mask(g, set, partial, &err);
    if (!m) return err;
    for (int64_t i = 0; i < n; i++) {
        int32_t t = ID_AT(i);
        if (!((m[t >> 6] >> (t & 63)) & 1)) LOGIT_AT(i) = -INFINITY;
    }
    return 0;
}

void bk_gr_get_stats(const bk_gr_engine *g, bk_gr_stats *out) { *out = g->stats; }

int64_t bk_gr_dump_set(const bk_gr_engine *g, int32_t set, int32_t *out, int64_t cap) {
    int64_t need = 0;
    int32_t n = g->set_len.a[set];
    for (int32_t k = 0; k < n; k++) {
        int32_t s = g->set_data.a[g->set_off.a[set] + k];
        int32_t depth = 0;
        for (int32_t x = s; x > 0; x = g->st_parent.a[x]) depth++;
        if (need + 1 + depth <= cap) {
            out[need] = depth;
            int32_t i = depth;
            for (int32_t x = s; x > 0; x = g->st_parent.a[x]) out[need + i--] = g->st_pos.a[x];
        }
        need += 1 + depth;
    }
    return need <= cap ? need : -need;
}
