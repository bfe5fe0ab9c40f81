// dtype.h: the four element types, their sizes and names, and type promotion.
#pragma once
#include <cstdint>
#include <cstddef>

namespace dyngrad {

// Ordered by promotion rank: bool < int64 < float32 < float64.
enum class DType : uint8_t { Bool = 0, Int64 = 1, Float32 = 2, Float64 = 3 };

inline size_t dtype_size(DType d) {
  switch (d) {
    case DType::Bool: return 1;
    case DType::Int64: return 8;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
  }
  return 0;
}

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

inline bool is_floating(DType d) { return d == DType::Float32 || d == DType::Float64; }
inline DType promote(DType a, DType b) { return a > b ? a : b; }
// Float-only ops (exp, tanh, /, ...) compute integer inputs in the default float type.
inline DType to_floating(DType d) { return is_floating(d) ? d : DType::Float32; }

// DG_DISPATCH(dtype, T, body): runs body with T bound to the C++ element type.
#define DG_DISPATCH_ALL(dt, T, ...)                              \
  switch (dt) {                                                  \
    case ::dyngrad::DType::Bool: { using T = bool; __VA_ARGS__; break; }     \
    case ::dyngrad::DType::Int64: { using T = int64_t; __VA_ARGS__; break; } \
    case ::dyngrad::DType::Float32: { using T = float; __VA_ARGS__; break; } \
    case ::dyngrad::DType::Float64: { using T = double; __VA_ARGS__; break; } \
  }

#define DG_DISPATCH_FLOAT(dt, T, ...)                            \
  switch (dt) {                                                  \
    case ::dyngrad::DType::Float32: { using T = float; __VA_ARGS__; break; } \
    case ::dyngrad::DType::Float64: { using T = double; __VA_ARGS__; break; } \
    default: ::dyngrad::throw_dtype_not_float(dt);               \
  }

[[noreturn]] void throw_dtype_not_float(DType d);

}  // namespace dyngrad
