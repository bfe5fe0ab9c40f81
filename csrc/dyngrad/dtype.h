// dtype.h: the element types, their sizes and names, torch's type promotion, and the two 16-bit float storage
// types (Half, BFloat16), whose arithmetic is done in float32 (Note [Half types]).
#pragma once
#include <cstdint>
#include <cstddef>
#include <complex>
#include <cstring>
#include <type_traits>

namespace dyngrad {

// The first four keep their old values, so that code comparing or storing them is unaffected.
enum class DType : uint8_t {
  Bool = 0, Int64 = 1, Float32 = 2, Float64 = 3, UInt8 = 4, Int8 = 5, Int16 = 6, Int32 = 7, Float16 = 8, BFloat16 = 9,
  Complex64 = 10, Complex128 = 11
};
constexpr int kNumDTypes = 12;

inline size_t dtype_size(DType d) {
  switch (d) {
    case DType::Bool: case DType::UInt8: case DType::Int8: return 1;
    case DType::Int16: case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: case DType::Complex64: return 8;
    case DType::Complex128: return 16;
  }
  return 0;
}

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
  }
  return "?";
}

inline bool is_half(DType d) { return d == DType::Float16 || d == DType::BFloat16; }
inline bool is_floating(DType d) { return d == DType::Float32 || d == DType::Float64 || is_half(d); }
inline bool is_complex(DType d) { return d == DType::Complex64 || d == DType::Complex128; }
inline bool is_integral(DType d) { return d != DType::Bool && !is_floating(d) && !is_complex(d); }
// the dtypes a gradient can flow through (torch: floating point and complex)
inline bool is_differentiable(DType d) { return is_floating(d) || is_complex(d); }
// Note [Complex dtypes]: complex64 and complex128 hold (real, imag) pairs of float32 / float64, laid out as
// std::complex (and numpy, and torch) do, so that view_as_real is a view. Their kernels compute over std::complex;
// their gradients follow torch's convention (conjugate Wirtinger calculus, derivatives.cpp). complex32 (torch's
// chalf) is not a dtype here.
inline DType complex_value_type(DType d) {  // complex64 -> float32, complex128 -> float64, else d
  return d == DType::Complex64 ? DType::Float32 : (d == DType::Complex128 ? DType::Float64 : d);
}

// Note [Narrow integers]: uint8, int8, int16 and int32 are stored natively, but elementwise and reduction kernels
// compute them in int64 and convert back: integer add, sub, mul, pow, min, max and comparisons commute with
// wrapping to the narrow type, so the results are exactly torch's (int8 127 + 1 = -128) while the kernels are
// instantiated for four types, not eight (binary size, build time). Copies, fills, where and index_add run natively.
inline bool is_narrow_int(DType d) {
  return d == DType::UInt8 || d == DType::Int8 || d == DType::Int16 || d == DType::Int32;
}
// the dtype a kernel computes `d` in: float32 for the half types, int64 for the narrow integers, else d
inline DType widen(DType d) { return is_half(d) ? DType::Float32 : (is_narrow_int(d) ? DType::Int64 : d); }

// The float dtype of Python floats and of integer inputs to float-only ops (torch.set_default_dtype).
inline DType& default_float_dtype_ref() {
  static DType d = DType::Float32;
  return d;
}
inline DType default_float_dtype() { return default_float_dtype_ref(); }

// torch's promotion lattice: bool < {uint8, int8} < int16 < int32 < int64 < {float16, bfloat16} < float32 < float64;
// the two incomparable pairs meet above: uint8 + int8 -> int16, float16 + bfloat16 -> float32.
inline int promotion_rank(DType d) {
  switch (d) {
    case DType::Bool: return 0;
    case DType::UInt8: case DType::Int8: return 1;
    case DType::Int16: return 2;
    case DType::Int32: return 3;
    case DType::Int64: return 4;
    case DType::Float16: case DType::BFloat16: return 5;
    case DType::Float32: return 6;
    case DType::Float64: return 7;
    case DType::Complex64: return 8;
    case DType::Complex128: return 9;
  }
  return 0;
}
[[noreturn]] void throw_no_complex32(const char* why);
// the complex dtype of a float dtype's precision (torch's toComplexType): float16 would give complex32; bfloat16,
// of float32's range, gives complex64 as in torch
inline DType complex_of(DType d) {
  if (is_complex(d)) return d;
  if (d == DType::Float64) return DType::Complex128;
  if (d == DType::Float16) throw_no_complex32("float16");
  return DType::Complex64;
}
// a complex dtype next to a real one: the complex dtype of their promoted value types (complex64 + float64 ->
// complex128, complex64 + int64 -> complex64), as torch's promoteTypes
inline DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_complex(a) || is_complex(b)) {  // the larger value type: a complex one's float ranks above a real one's
    const DType va = complex_value_type(a), vb = complex_value_type(b);
    return complex_of(promotion_rank(va) >= promotion_rank(vb) ? va : vb);
  }
  int ra = promotion_rank(a), rb = promotion_rank(b);
  if (ra == rb) return ra == 1 ? DType::Int16 : DType::Float32;  // {uint8, int8} or {float16, bfloat16}
  return ra > rb ? a : b;
}
// Float-only ops (exp, tanh, /, ...) compute integer inputs in the default float type.
inline DType to_floating(DType d) { return is_differentiable(d) ? d : default_float_dtype(); }
// The category of a dtype in torch's promotion of operands of different priority: bool 0 < int 1 < float 2 < complex 3.
inline int dtype_category(DType d) {
  return d == DType::Bool ? 0 : (is_complex(d) ? 3 : (is_floating(d) ? 2 : 1));
}
// torch's combine_categories: the result of a higher-priority operand's dtype `higher` (dims over 0-d over Python
// numbers) and a lower one's; the lower only matters when its category is higher, and a complex lower next to a
// float higher keeps the float's precision (float64 * 1j is complex128).
inline DType combine_categories(DType higher, DType lower) {
  if (is_complex(higher)) return higher;
  if (is_complex(lower)) return is_floating(higher) ? complex_of(higher) : lower;
  if (is_floating(higher)) return higher;
  if (higher == DType::Bool || is_floating(lower)) return promote(higher, lower);
  return higher;
}

// Note [Half types]: float16 and bfloat16 are storage types. Kernels convert them to float32, compute there, and
// round the result back (to nearest, ties to even), as torch's CPU kernels do; only copies, fills, where and
// gathers touch them directly. Half and BFloat16 below are the 16-bit patterns with conversions to and from float.
inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline uint16_t float_to_half_bits(float f) {
  uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));  // NaN, inf
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {
    // below 2**-14, a half subnormal: adding 0.5 puts the value's half ulp (2**-24) at float's ulp, so the FPU rounds
    return (uint16_t)(sign | (f32_bits(bits_f32(ax) + 0.5f) - 0x3f000000u));
  }
  ax += 0xc8000fffu + ((ax >> 13) & 1u);  // rebias the exponent (127 -> 15) and round the 13 dropped bits to even
  return (uint16_t)(sign | (ax >> 13));
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  if (em >= 0x7c00u) return bits_f32(sign | 0x7f800000u | ((em & 0x3ffu) << 13));
  if (em >= 0x0400u) return bits_f32(sign | ((em << 13) + 0x38000000u));
  float f = (float)em * 5.9604644775390625e-8f;  // subnormal: em * 2**-24
  return sign ? -f : f;
}

inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  x += 0x7fffu + ((x >> 16) & 1u);                                                 // round to nearest even
  return (uint16_t)(x >> 16);
}
inline float bfloat16_bits_to_float(uint16_t b) { return bits_f32((uint32_t)b << 16); }

struct Half {
  uint16_t bits;
  Half() = default;
  template <typename V, std::enable_if_t<std::is_arithmetic_v<V>, int> = 0>
  Half(V v) : bits(float_to_half_bits((float)v)) {}
  operator float() const { return half_bits_to_float(bits); }
};
struct BFloat16 {
  uint16_t bits;
  BFloat16() = default;
  template <typename V, std::enable_if_t<std::is_arithmetic_v<V>, int> = 0>
  BFloat16(V v) : bits(float_to_bfloat16_bits((float)v)) {}
  operator float() const { return bfloat16_bits_to_float(bits); }
};
template <typename T>
constexpr bool is_half_type_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
using complex64_t = std::complex<float>;
using complex128_t = std::complex<double>;
template <typename T> struct is_complex_type : std::false_type {};
template <typename T> struct is_complex_type<std::complex<T>> : std::true_type {};
template <typename T> constexpr bool is_complex_type_v = is_complex_type<T>::value;
// a stored value's real part as R, its imaginary part as a double (0 for the real types)
template <typename R = double, typename T> inline R real_part(const T& x) {
  if constexpr (is_complex_type_v<T>) return (R)x.real();
  else return static_cast<R>(x);
}
template <typename T> inline double imag_part(const T& x) {
  if constexpr (is_complex_type_v<T>) return (double)x.imag();
  else return 0.0;
}

[[noreturn]] void throw_dtype_not_float(DType d);
[[noreturn]] void throw_dtype_unsupported(DType d);

// DG_DISPATCH_ALL(dtype, T, body): runs body with T bound to the C++ element type of the dtypes kernels compute in
// (bool, int64, float32, float64); any other dtype raises TypeError: callers widen() it first (Note [Half types],
// Note [Narrow integers]).
#define DG_DISPATCH_ALL(dt, T, ...)                                              \
  switch (dt) {                                                                  \
    case ::dyngrad::DType::Bool: { using T = bool; __VA_ARGS__; break; }         \
    case ::dyngrad::DType::Int64: { using T = int64_t; __VA_ARGS__; break; }     \
    case ::dyngrad::DType::Float32: { using T = float; __VA_ARGS__; break; }     \
    case ::dyngrad::DType::Float64: { using T = double; __VA_ARGS__; break; }    \
    default: ::dyngrad::throw_dtype_unsupported(dt);                             \
  }

// DG_DISPATCH_INTEGERS: DG_DISPATCH_ALL and the narrow integers natively (index_add, random integers).
#define DG_DISPATCH_INTEGERS(dt, T, ...)                                         \
  switch (dt) {                                                                  \
    case ::dyngrad::DType::UInt8: { using T = uint8_t; __VA_ARGS__; break; }     \
    case ::dyngrad::DType::Int8: { using T = int8_t; __VA_ARGS__; break; }       \
    case ::dyngrad::DType::Int16: { using T = int16_t; __VA_ARGS__; break; }     \
    case ::dyngrad::DType::Int32: { using T = int32_t; __VA_ARGS__; break; }     \
    default: DG_DISPATCH_ALL(dt, T, __VA_ARGS__);                                \
  }

// DG_DISPATCH_COMPLEX: the two complex dtypes as std::complex (Note [Complex dtypes]).
#define DG_DISPATCH_COMPLEX(dt, T, ...)                                                       \
  switch (dt) {                                                                               \
    case ::dyngrad::DType::Complex64: { using T = ::dyngrad::complex64_t; __VA_ARGS__; break; }   \
    case ::dyngrad::DType::Complex128: { using T = ::dyngrad::complex128_t; __VA_ARGS__; break; } \
    default: ::dyngrad::throw_dtype_unsupported(dt);                                          \
  }

// DG_DISPATCH_STORAGE: every dtype, the 16-bit floats as Half / BFloat16 (for copies, fills and moves only).
#define DG_DISPATCH_STORAGE(dt, T, ...)                                          \
  switch (dt) {                                                                  \
    case ::dyngrad::DType::Complex64: { using T = ::dyngrad::complex64_t; __VA_ARGS__; break; }   \
    case ::dyngrad::DType::Complex128: { using T = ::dyngrad::complex128_t; __VA_ARGS__; break; } \
    case ::dyngrad::DType::Float16: { using T = ::dyngrad::Half; __VA_ARGS__; break; }      \
    case ::dyngrad::DType::BFloat16: { using T = ::dyngrad::BFloat16; __VA_ARGS__; break; } \
    default: DG_DISPATCH_INTEGERS(dt, T, __VA_ARGS__);                           \
  }

#define DG_DISPATCH_FLOAT(dt, T, ...)                            \
  switch (dt) {                                                  \
    case ::dyngrad::DType::Float32: { using T = float; __VA_ARGS__; break; } \
    case ::dyngrad::DType::Float64: { using T = double; __VA_ARGS__; break; } \
    default: ::dyngrad::throw_dtype_not_float(dt);               \
  }

}  // namespace dyngrad
