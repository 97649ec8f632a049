/* Half-precision conversions as ggml-cpu does them on an F16C CPU.
 *   f16 -> f32: exact (vcvtph2ps).
 *   f32 -> f16: round to nearest even (vcvtps2ph with imm 0), as ggml's SET_ROWS and GGML_CPU_FP32_TO_FP16.
 * And bfloat16 (the top 16 bits of a float32), as ggml does it (ggml-impl.h):
 *   bf16 -> f32: exact (a shift left by 16).
 *   f32 -> bf16: round to nearest even on the bits (add 0x7fff plus the lowest kept bit, shift right by 16); a
 *   NaN keeps its top bits with the quiet bit (0x40) set. No flush of subnormals. This is ggml_cpu_fp32_to_bf16
 *   (the BF16 from_float of ggml-cpu without AVX512-BF16) and ggml_fp32_to_bf16_row_ref (llama-quantize).
 */
#ifndef BK_FP16_H
#define BK_FP16_H
#include <stdint.h>
#include <stddef.h>
#include <immintrin.h>

static inline float bk_h2f(uint16_t h) { return _cvtsh_ss(h); }
static inline uint16_t bk_f2h(float f) { return _cvtss_sh(f, 0); }

void bk_fp16_to_fp32_row(const uint16_t *x, float *y, int64_t n);
void bk_fp32_to_fp16_row(const float *x, uint16_t *y, int64_t n);

static inline float bk_bf2f(uint16_t h) {
    union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16};
    return v.f;
}
static inline uint16_t bk_f2bf(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 64);
    return (uint16_t)((v.u + (0x7fffu + ((v.u >> 16) & 1))) >> 16);
}

void bk_bf16_to_fp32_row(const uint16_t *x, float *y, int64_t n);
void bk_fp32_to_bf16_row(const float *x, uint16_t *y, int64_t n);

#endif
