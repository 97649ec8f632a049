/* Half-precision conversions as ggml-cpu does them on an F16C CPU.
 *   f16 -> f32: exact (vcvtph2ps).
 *   f32 -> f16: round to nearest even (vcvtps2ph with imm 0), as ggml's SET_ROWS and GGML_CPU_FP32_TO_FP16.
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

#endif
