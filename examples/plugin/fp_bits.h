/* Element access for the example plugin: fp16 / bf16 / fp32 values of DLTensors as float, written back with
 * round-to-nearest-even (IEEE binary16 and bfloat16 bit patterns, NaN and infinities kept). Plain C99. */
#ifndef KVCONF_EXAMPLE_FP_BITS_H_
#define KVCONF_EXAMPLE_FP_BITS_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <dlpack/dlpack.h>

static inline float ex_bits_to_float(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}

static inline uint32_t ex_float_to_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}

static inline float ex_half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) { /* zero or subnormal: m · 2^-24 */
    const float v = (float)m * 0x1p-24f;
    return ex_bits_to_float(ex_float_to_bits(v) | sign);
  }
  if (e == 31) return ex_bits_to_float(sign | 0x7f800000u | (m << 13));
  return ex_bits_to_float(sign | ((e + 112u) << 23) | (m << 13));
}

static inline uint16_t ex_float_to_half(float x) {
  const uint32_t f = ex_float_to_bits(x);
  const uint16_t sign = (uint16_t)((f >> 16) & 0x8000u);
  const uint32_t a = f & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u)); /* inf, NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* >= 65520 rounds to inf */
  if (a < 0x38800000u) {                                    /* below 2^-14: subnormal (or rounds up to 2^-14) */
    const float scaled = ex_bits_to_float(a) * 0x1p24f;     /* exact */
    return (uint16_t)(sign | (uint16_t)nearbyintf(scaled)); /* default rounding mode: nearest even */
  }
  uint32_t h = ((a >> 23) - 112u) << 10 | ((a >> 13) & 0x3ffu);
  const uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; /* a carry into the exponent is right */
  return (uint16_t)(sign | h);
}

static inline float ex_bf16_to_float(uint16_t b) { return ex_bits_to_float((uint32_t)b << 16); }

static inline uint16_t ex_float_to_bf16(float x) {
  uint32_t f = ex_float_to_bits(x);
  if ((f & 0x7f800000u) == 0x7f800000u && (f & 0x7fffffu)) return (uint16_t)((f >> 16) | 0x40u); /* NaN */
  f += 0x7fffu + ((f >> 16) & 1u);
  return (uint16_t)(f >> 16);
}

/* Element i of a compact tensor. */
static inline float ex_load(const DLTensor* t, size_t i) {
  const char* p = (const char*)t->data + t->byte_offset;
  if (t->dtype.bits == 32) {
    float v;
    memcpy(&v, p + 4 * i, 4);
    return v;
  }
  uint16_t h;
  memcpy(&h, p + 2 * i, 2);
  return t->dtype.code == kDLBfloat ? ex_bf16_to_float(h) : ex_half_to_float(h);
}

/* Element i of a compact tensor, rounded to its dtype. */
static inline void ex_store(DLTensor* t, size_t i, float v) {
  char* p = (char*)t->data + t->byte_offset;
  if (t->dtype.bits == 32) {
    memcpy(p + 4 * i, &v, 4);
    return;
  }
  const uint16_t h = t->dtype.code == kDLBfloat ? ex_float_to_bf16(v) : ex_float_to_half(v);
  memcpy(p + 2 * i, &h, 2);
}

/* v rounded to the dtype of t (the value a store then load gives). */
static inline float ex_round_like(const DLTensor* t, float v) {
  if (t->dtype.bits == 32) return v;
  return t->dtype.code == kDLBfloat ? ex_bf16_to_float(ex_float_to_bf16(v)) : ex_half_to_float(ex_float_to_half(v));
}

#endif /* KVCONF_EXAMPLE_FP_BITS_H_ */
