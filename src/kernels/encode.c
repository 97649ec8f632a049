/* Reference encoders (encode.h): the block formats llama-quantize b11192 writes without an importance matrix.
 *
 * Read from ggml/src/ggml-quants.c of b11192 (quantize_row_{q4_1,q5_0,q5_1,q2_K,q3_K,q4_K,q5_K,q6_K}_ref and the
 * fitting helpers they call); written here in this project's words. Bits: every sum is taken in element order,
 * every product in the order the reference writes it (a*b*c is (a*b)*c), no FMA (BANKML_FP_FLAGS), divisions
 * where the reference divides; rounding to an integer is round-half-even through the 1.5 * 2^23 trick; halves
 * are rounded to nearest even as ggml-base's software conversion does (NaN -> 0x7e00).
 */
#include "encode.h"
#include "quants_iq4.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- scalars ---------------------------------------------------------------------------------------------- */

static inline uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* float -> half, round to nearest even; NaN becomes the quiet 0x7e00 */
static uint16_t to_half(float f) {
    const uint32_t w = f_bits(f);
    const uint16_t sign = (uint16_t)((w >> 16) & 0x8000u);
    const uint32_t a = w & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;
    if (a >= 0x477ff000u) return sign | 0x7c00u;          /* 65520 and up (inf included) round to inf */
    const uint32_t e = a >> 23;
    if (e < 113) {                                          /* below 2^-14: a half subnormal (or zero) */
        const uint32_t shift = 126 - e;                     /* value = m * 2^-24 >> shift, m with its lead bit */
        if (e == 0 || shift > 24) return sign;              /* under 2^-25 (or exactly: even) -> 0 */
        const uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    const uint32_t mant = a & 0x7fffffu;
    uint32_t q = ((e - 112) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++;   /* a carry moves into the exponent, as it should */
    return sign | (uint16_t)q;
}

/* half -> float, exact */
static float from_half(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    if (e == 0x1f) return bits_f(sign | 0x7f800000u | (m << 13));
    if (e == 0) return m ? (sign ? -1.0f : 1.0f) * ((float)m * 0x1p-24f) : bits_f(sign);
    return bits_f(sign | ((e + 112) << 23) | (m << 13));
}

static inline void put_half(uint8_t *p, float f) { uint16_t h = to_half(f); memcpy(p, &h, 2); }
static inline float half_at(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return from_half(h); }

/* round half to even for |v| < 2^22: adding 1.5 * 2^23 leaves the integer in the low mantissa bits */
static inline int round_even(float v) {
    return (int)(f_bits(v + 12582912.f) & 0x7fffffu) - 0x400000;
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- 32-element formats ----------------------------------------------------------------------------------- */

/* The affine 32-blocks (Q4_1, Q5_1): the block's range over `levels` steps; writes the d and min halves at b and
 * returns 1/d (0 for a flat block) in *id and the min in *lo. */
static void affine_head(const float *x, int levels, uint8_t *b, float *lo_out, float *id_out) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < 32; j++) { if (x[j] < lo) lo = x[j]; if (x[j] > hi) hi = x[j]; }
    const float d = (hi - lo) / levels;
    *id_out = d ? 1.0f / d : 0.0f;
    *lo_out = lo;
    put_half(b, d);
    put_half(b + 2, lo);
}

/* Q4_1 (20 bytes): d, m halves; nibbles, elements 0..15 low, 16..31 high. Levels (x - min) / d, +0.5 truncated. */
static void enc_q4_1(const float *x, uint8_t *b) {
    float lo, id;
    affine_head(x, 15, b, &lo, &id);
    for (int j = 0; j < 16; j++) {
        int a = (int8_t)(int)((x[j] - lo) * id + 0.5f), c = (int8_t)(int)((x[j + 16] - lo) * id + 0.5f);
        a = a < 15 ? a : 15;
        c = c < 15 ? c : 15;
        b[4 + j] = (uint8_t)((a & 0xff) | ((c & 0xff) << 4));
    }
}

static void pack5(uint8_t *qh4, uint8_t *qs16, const int *lv) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs16[j] = (uint8_t)((lv[j] & 0x0f) | ((lv[j + 16] & 0x0f) << 4));
        qh |= (uint32_t)((lv[j] >> 4) & 1) << j;
        qh |= (uint32_t)((lv[j + 16] >> 4) & 1) << (j + 16);
    }
    memcpy(qh4, &qh, 4);
}

/* Q5_0 (22 bytes): d half, the fifth bits (u32), nibbles. d = the first element of largest magnitude / -16. */
static void enc_q5_0(const float *x, uint8_t *b) {
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < 32; j++) if (amax < fabsf(x[j])) { amax = fabsf(x[j]); m = x[j]; }
    const float d = m / -16;
    const float id = d ? 1.0f / d : 0.0f;
    put_half(b, d);
    int lv[32];
    for (int j = 0; j < 32; j++) {
        const int v = (int8_t)(int)(x[j] * id + 16.5f);
        lv[j] = (uint8_t)(v < 31 ? v : 31);
    }
    pack5(b + 2, b + 6, lv);
}

/* Q5_1 (24 bytes): d, m halves, the fifth bits, nibbles. d = (max - min) / 31. */
static void enc_q5_1(const float *x, uint8_t *b) {
    float lo, id;
    affine_head(x, 31, b, &lo, &id);
    int lv[32];
    for (int j = 0; j < 32; j++) lv[j] = (uint8_t)(int)((x[j] - lo) * id + 0.5f);
    pack5(b + 4, b + 8, lv);
}

/* ---- level fitting for the K formats ---------------------------------------------------------------------- */

/* Levels 0..nmax with a scale and a (non-positive) offset for n values under weights w: start from the
 * range's grid, then try nstep + 1 stretched grids (rmin + rdelta * k levels beyond nmax), each solved by
 * weighted least squares for scale and offset (the offset held at 0 when it comes out positive), and keep the
 * one of least weighted error (absolute with mad, squared otherwise). Returns the scale; *neg_min = -offset. */
static float fit_scale_offset(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                              float rmin, float rdelta, int nstep, int mad) {
    uint8_t trial[32];
    float lo = x[0], hi = x[0];
    float sw = w[0];
    float sx = sw * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sw += w[i];
        sx += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.f;
    }
    float inv = nmax / (hi - lo);
    float scale = 1 / inv;
    float best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(round_even(inv * (x[i] - lo)), 0, nmax);
        float e = scale * L[i] + lo - x[i];
        e = mad ? fabsf(e) : e * e;
        best += w[i] * e;
    }
    if (nstep < 1) {
        *neg_min = -lo;
        return scale;
    }
    for (int k = 0; k <= nstep; k++) {
        inv = (rmin + rdelta * k + nmax) / (hi - lo);
        float sl = 0, sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(round_even(inv * (x[i] - lo)), 0, nmax);
            trial[i] = (uint8_t)l;
            sl += w[i] * l;
            sl2 += w[i] * l * l;
            sxl += w[i] * l * x[i];
        }
        const float det = sw * sl2 - sl * sl;
        if (!(det > 0)) continue;
        float s = (sw * sxl - sx * sl) / det;
        float off = (sl2 * sx - sl * sxl) / det;
        if (off > 0) {
            off = 0;
            s = sxl / sl2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float e = s * trial[i] + off - x[i];
            e = mad ? fabsf(e) : e * e;
            err += w[i] * e;
        }
        if (err < best) {
            memcpy(L, trial, (size_t)n);
            best = err;
            scale = s;
            lo = off;
        }
    }
    *neg_min = -lo;
    return scale;
}

/* The opening both signed fits share: the element of largest magnitude m (the first one), levels
 * round(-nmax / m * x) in -nmax..nmax-1 stored + `stored_offset`, and their x^2-weighted sums. Returns 0 (levels
 * all 0) when every |x| is below 1e-15. */
static int signed_start(int n, int nmax, const float *x, int8_t *L, int stored_offset, float *m_out, float *sxl,
                        float *sl2) {
    float amax = 0, m = 0;
    for (int i = 0; i < n; i++) if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); m = x[i]; }
    *m_out = m;
    *sxl = *sl2 = 0;
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    const float inv = -nmax / m;
    for (int i = 0; i < n; i++) {
        const int l = clampi(round_even(inv * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + stored_offset);
        const float w = x[i] * x[i];
        *sxl += w * x[i] * l;
        *sl2 += w * l * l;
    }
    return 1;
}

/* Signed levels -nmax..nmax-1 (stored + nmax) for Q6_K's sub-blocks: the start above, refined over 18
 * neighbouring grids by x^2-weighted least squares. Returns the scale. */
static float fit_signed_x2(int n, int nmax, const float *x, int8_t *L) {
    float m, sxl, sl2;
    if (!signed_start(n, nmax, x, L, nmax, &m, &sxl, &sl2)) return 0.f;
    float scale = sl2 ? sxl / sl2 : 0.0f;
    float best = scale * sxl;
    for (int k = -9; k <= 9; k++) {
        if (k == 0) continue;
        const float inv = -(nmax + 0.1f * k) / m;
        sxl = sl2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(round_even(inv * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sxl += w * x[i] * l;
            sl2 += w * l * l;
        }
        if (sl2 > 0 && sxl * sxl > best * sl2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(round_even(inv * x[i]), -nmax, nmax - 1));
            scale = sxl / sl2;
            best = scale * sxl;
        }
    }
    return scale;
}

/* Q3_K's sub-blocks: the start above (levels kept signed), then up to 5 passes moving single levels while the
 * x^2-weighted fit improves. Levels stored + nmax, except when all are ~0 (then 0). */
static float fit_signed_moves(int n, int nmax, const float *x, int8_t *L) {
    float m, sxl, sl2;
    if (!signed_start(n, nmax, x, L, 0, &m, &sxl, &sl2)) return 0.f;
    for (int pass = 0; pass < 5; pass++) {
        int moved = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float a = sxl - w * x[i] * L[i];
            if (!(a > 0)) continue;
            float b = sl2 - w * L[i] * L[i];
            const int l = clampi(round_even(x[i] * b / a), -nmax, nmax - 1);
            if (l == L[i]) continue;
            a += w * x[i] * l;
            b += w * l * l;
            if (b > 0 && a * a * sl2 > sxl * sxl * b) {
                L[i] = (int8_t)l;
                sxl = a;
                sl2 = b;
                moved++;
            }
        }
        if (!moved) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return sl2 > 0.0f ? sxl / sl2 : 0.0f;
}

/* the 12 bytes of 6-bit scales and mins of Q4_K / Q5_K, and reading them back */
static void pack_scales_k4(uint8_t *s, const uint8_t *ls, const uint8_t *lm) {
    for (int j = 0; j < 4; j++) { s[j] = ls[j]; s[j + 4] = lm[j]; }
    for (int j = 4; j < 8; j++) {
        s[j + 4] = (uint8_t)((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
        s[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
        s[j] |= (uint8_t)((lm[j] >> 4) << 6);
    }
}

static void scale_min_k4(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K and Q5_K share everything but the level count, the grid search and the bit layout: 8 sub-blocks of
 * 32, weights sqrt(mean x^2) + |x|, scales and mins quantized to 6 bits against their maxima. */
static void fit_k_affine(const float *x, uint8_t *L, int nmax, float rmin, int nstep, uint8_t *dmin4,
                         uint8_t *scales12) {
    float sc[8], mn[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float s2 = 0;
        for (int l = 0; l < 32; l++) s2 += xs[l] * xs[l];
        const float av = sqrtf(s2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av + fabsf(xs[l]);
        sc[j] = fit_scale_offset(32, nmax, xs, w, L + 32 * j, &mn[j], rmin, 0.1f, nstep, 0);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mn[j] > max_min) max_min = mn[j];
    }
    const float is = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float im = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        const uint8_t a = (uint8_t)round_even(is * sc[j]), c = (uint8_t)round_even(im * mn[j]);
        ls[j] = a < 63 ? a : 63;
        lm[j] = c < 63 ? c : 63;
    }
    pack_scales_k4(scales12, ls, lm);
    put_half(dmin4, max_scale / 63.f);
    put_half(dmin4 + 2, max_min / 63.f);
    const float dd = half_at(dmin4), dm = half_at(dmin4 + 2);
    for (int j = 0; j < 8; j++) {
        int s, m;
        scale_min_k4(scales12, j, &s, &m);
        const float d = dd * s;
        if (!d) continue;
        const float off = dm * m;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clampi(round_even((x[32 * j + i] + off) / d), 0, nmax);
    }
}

/* Q4_K (144 bytes): d, dmin, 12 scale bytes, 128 bytes of nibbles (each 64 elements: 32 low, 32 high). */
static void enc_q4_k(const float *x, uint8_t *b) {
    uint8_t L[256];
    memset(b, 0, 144);
    fit_k_affine(x, L, 15, -1.f, 20, b, b + 4);
    uint8_t *q = b + 16;
    for (int j = 0; j < 256; j += 64, q += 32)
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

/* Q5_K (176 bytes): d, dmin, 12 scale bytes, 32 bytes of fifth bits, 128 bytes of nibbles. */
static void enc_q5_k(const float *x, uint8_t *b) {
    uint8_t L[256];
    memset(b, 0, 176);
    fit_k_affine(x, L, 31, -0.5f, 15, b, b + 4);
    uint8_t *qh = b + 16, *ql = b + 48;
    for (int n = 0, bit = 0; n < 256; n += 64, bit += 2, ql += 32) {
        for (int j = 0; j < 32; j++) {
            int a = L[n + j], c = L[n + j + 32];
            if (a > 15) { a -= 16; qh[j] |= (uint8_t)(1u << bit); }
            if (c > 15) { c -= 16; qh[j] |= (uint8_t)(2u << bit); }
            ql[j] = (uint8_t)(a | (c << 4));
        }
    }
}

/* 2-bit planes of Q2_K / Q3_K: each 128 elements give 32 bytes, element l + 32 k in bits 2k..2k+1 of byte l */
static void pack_2bit(uint8_t *qs, const uint8_t *L) {
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

/* Q2_K (84 bytes): 16 scale bytes (scale low nibble, min high), 64 bytes of 2-bit levels, d, dmin. Sub-blocks of
 * 16, weights |x|, a mean-absolute-error fit of levels 0..3. */
static void enc_q2_k(const float *x, uint8_t *b) {
    uint8_t L[256];
    float sc[16], mn[16], w[16];
    float max_scale = 0, max_min = 0;
    uint8_t *scales = b, *qs = b + 16, *dd = b + 80;
    for (int j = 0; j < 16; j++) {
        for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
        sc[j] = fit_scale_offset(16, 3, x + 16 * j, w, L + 16 * j, &mn[j], -0.5f, 0.1f, 15, 1);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mn[j] > max_min) max_min = mn[j];
    }
    if (max_scale > 0) {
        const float is = 15.f / max_scale;
        for (int j = 0; j < 16; j++) scales[j] = (uint8_t)round_even(is * sc[j]);
        put_half(dd, max_scale / 15.f);
    } else {
        memset(scales, 0, 16);
        put_half(dd, 0.f);
    }
    if (max_min > 0) {
        const float im = 15.f / max_min;
        for (int j = 0; j < 16; j++) scales[j] |= (uint8_t)(round_even(im * mn[j]) << 4);
        put_half(dd + 2, max_min / 15.f);
    } else {
        put_half(dd + 2, 0.f);
    }
    const float d0 = half_at(dd), m0 = half_at(dd + 2);
    for (int j = 0; j < 16; j++) {
        const float d = d0 * (scales[j] & 0x0f);
        if (!d) continue;
        const float off = m0 * (scales[j] >> 4);
        for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)clampi(round_even((x[16 * j + i] + off) / d), 0, 3);
    }
    pack_2bit(qs, L);
}

/* Q3_K (110 bytes): 32 bytes of high bits, 64 bytes of 2-bit levels, 12 bytes of 6-bit signed scales, d. */
static void enc_q3_k(const float *x, uint8_t *b) {
    int8_t L[256];
    float sc[16];
    uint8_t *hmask = b, *qs = b + 32, *scales = b + 96, *dp = b + 108;
    float amax = 0, max_scale = 0;
    for (int j = 0; j < 16; j++) {
        sc[j] = fit_signed_moves(16, 4, x + 16 * j, L + 16 * j);
        if (fabsf(sc[j]) > amax) { amax = fabsf(sc[j]); max_scale = sc[j]; }
    }
    memset(scales, 0, 12);
    if (max_scale) {
        const float is = -32.f / max_scale;
        for (int j = 0; j < 16; j++) {
            int l = (int8_t)round_even(is * sc[j]);
            l = clampi(l, -32, 31) + 32;
            if (j < 8) scales[j] = (uint8_t)(l & 0x0f);
            else scales[j - 8] |= (uint8_t)((l & 0x0f) << 4);
            scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        put_half(dp, 1 / is);
    } else {
        put_half(dp, 0.f);
    }
    const float d0 = half_at(dp);
    for (int j = 0; j < 16; j++) {
        int s = j < 8 ? (scales[j] & 0x0f) : (scales[j - 8] >> 4);
        s = (int8_t)((s | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
        const float d = d0 * s;
        if (!d) continue;
        for (int i = 0; i < 16; i++) L[16 * j + i] = (int8_t)(clampi(round_even(x[16 * j + i] / d), -4, 3) + 4);
    }
    memset(hmask, 0, 32);
    uint8_t lv[256];
    for (int j = 0; j < 256; j++) {
        int l = L[j];
        if (l > 3) {
            hmask[j % 32] |= (uint8_t)(1u << (j / 32));
            l -= 4;
        }
        lv[j] = (uint8_t)l;
    }
    pack_2bit(qs, lv);
}

/* Q6_K (210 bytes): 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed 8-bit scales, d. */
static void enc_q6_k(const float *x, uint8_t *b) {
    int8_t L[256];
    float sc[16];
    uint8_t *ql = b, *qh = b + 128;
    int8_t *scales = (int8_t *)(b + 192);
    float max_scale = 0, max_abs = 0;
    for (int j = 0; j < 16; j++) {
        sc[j] = fit_signed_x2(16, 32, x + 16 * j, L + 16 * j);
        if (fabsf(sc[j]) > max_abs) { max_abs = fabsf(sc[j]); max_scale = sc[j]; }
    }
    if (max_abs < 1e-15f) {
        memset(b, 0, 210);
        put_half(b + 208, 0.f);
        return;
    }
    const float is = -128.f / max_scale;
    put_half(b + 208, 1 / is);
    for (int j = 0; j < 16; j++) {
        const int s = round_even(is * sc[j]);
        scales[j] = (int8_t)(s < 127 ? s : 127);
    }
    const float d0 = half_at(b + 208);
    for (int j = 0; j < 16; j++) {
        const float d = d0 * scales[j];
        if (!d) continue;
        for (int i = 0; i < 16; i++) L[16 * j + i] = (int8_t)(clampi(round_even(x[16 * j + i] / d), -32, 31) + 32);
    }
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            const int a = L[j + l], c = L[j + l + 32], e = L[j + l + 64], g = L[j + l + 96];
            ql[l] = (uint8_t)((a & 0x0f) | ((e & 0x0f) << 4));
            ql[l + 32] = (uint8_t)((c & 0x0f) | ((g & 0x0f) << 4));
            qh[l] = (uint8_t)((a >> 4) | ((c >> 4) << 2) | ((e >> 4) << 4) | ((g >> 4) << 6));
        }
    }
}

/* ---- dispatch --------------------------------------------------------------------------------------------- */

typedef void (*enc_fn)(const float *, uint8_t *);

static int layout(int type, int64_t *elems, int64_t *bytes, enc_fn *fn) {
    switch (type) {
    case BK_ENC_Q4_1: *elems = 32; *bytes = 20; *fn = enc_q4_1; return 0;
    case BK_ENC_Q5_0: *elems = 32; *bytes = 22; *fn = enc_q5_0; return 0;
    case BK_ENC_Q5_1: *elems = 32; *bytes = 24; *fn = enc_q5_1; return 0;
    case BK_ENC_Q2_K: *elems = 256; *bytes = 84; *fn = enc_q2_k; return 0;
    case BK_ENC_Q3_K: *elems = 256; *bytes = 110; *fn = enc_q3_k; return 0;
    case BK_ENC_Q4_K: *elems = 256; *bytes = 144; *fn = enc_q4_k; return 0;
    case BK_ENC_Q5_K: *elems = 256; *bytes = 176; *fn = enc_q5_k; return 0;
    case BK_ENC_Q6_K: *elems = 256; *bytes = 210; *fn = enc_q6_k; return 0;
    case BK_ENC_IQ4_NL: *elems = 32; *bytes = 18; *fn = bk_iq4_encode_nl; return 0;
    case BK_ENC_IQ4_XS: *elems = 256; *bytes = 136; *fn = bk_iq4_encode_xs; return 0;
    default: return -1;
    }
}

uint16_t bk_encode_to_half(float f) { return to_half(f); }

int64_t bk_encode_block_bytes(int type) {
    int64_t e, b; enc_fn f;
    return layout(type, &e, &b, &f) ? 0 : b;
}

int64_t bk_encode_block_elems(int type) {
    int64_t e, b; enc_fn f;
    return layout(type, &e, &b, &f) ? 0 : e;
}

int bk_encode(int type, const float *x, uint8_t *out, int64_t n) {
    int64_t e, b; enc_fn f;
    if (layout(type, &e, &b, &f) || n % e) return -1;
    for (int64_t i = 0; i < n / e; i++) f(x + i * e, out + i * b);
    return 0;
}
