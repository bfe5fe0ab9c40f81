// sort.cpp: the orders of sort, argsort and topk along one dim.
//
// Note [Sorting by keys]: every element becomes an unsigned integer key whose unsigned order is the order wanted
// (floats: the sign bit flipped, negatives' other bits too; -0.0 as 0.0; NaN the largest key; integers: the sign
// bit flipped; descending: the keys complemented, which puts NaN first as torch does). Sorting (key, position)
// pairs with positions breaking ties gives one answer whatever the algorithm: the stable order, which is what
// numpy's stable argsort gives the reference engine, so the engines agree on ties and `stable=` changes nothing.
// Rows of up to kRadixFrom elements sort their pairs with std::sort (introsort, not stable, made deterministic
// by the tie-break); longer rows with an LSD radix sort of 8-bit digits, which is stable by construction, needs
// no tie-break and skips the digits all keys share. topk selects with std::nth_element and sorts only the k
// chosen (O(n + k log k)). Measured by bench/prims.py (the sort and topk rows).
#include "sort.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "loop.h"

namespace dyngrad {

namespace {

constexpr int64_t kRadixFrom = 256;

inline uint32_t order_key(float x) {
  if (x != x) return 0xFFFFFFFFu;
  if (x == 0.0f) x = 0.0f;  // -0.0 is 0.0
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
inline uint64_t order_key(double x) {
  if (x != x) return ~uint64_t(0);
  if (x == 0.0) x = 0.0;
  uint64_t b;
  std::memcpy(&b, &x, 8);
  return (b >> 63) ? ~b : (b | (uint64_t(1) << 63));
}
inline uint64_t order_key(int64_t x) { return (uint64_t)x ^ (uint64_t(1) << 63); }

template <typename K>
struct KeyedPosition {
  K key;
  int64_t pos;
  bool operator<(const KeyedPosition& o) const { return key < o.key || (key == o.key && pos < o.pos); }
};

// LSD radix sort of (keys, positions) by keys, stable; the scratch vectors are reused across rows
template <typename K>
void radix_sort(std::vector<K>& keys, std::vector<int64_t>& pos, std::vector<K>& keys2, std::vector<int64_t>& pos2) {
  constexpr int kDigits = (int)sizeof(K);
  const size_t n = keys.size();
  std::vector<size_t> counts((size_t)kDigits * 256, 0);
  for (size_t i = 0; i < n; ++i) {
    K k = keys[i];
    for (int d = 0; d < kDigits; ++d) ++counts[(size_t)d * 256 + ((k >> (8 * d)) & 0xFF)];
  }
  keys2.resize(n);
  pos2.resize(n);
  for (int d = 0; d < kDigits; ++d) {
    size_t* c = &counts[(size_t)d * 256];
    if (c[(keys[0] >> (8 * d)) & 0xFF] == n) continue;  // every key has this digit: the pass would move nothing
    size_t start = 0;
    for (int b = 0; b < 256; ++b) {
      size_t m = c[b];
      c[b] = start;
      start += m;
    }
    for (size_t i = 0; i < n; ++i) {
      size_t to = c[(keys[i] >> (8 * d)) & 0xFF]++;
      keys2[to] = keys[i];
      pos2[to] = pos[i];
    }
    keys.swap(keys2);
    pos.swap(pos2);
  }
}

// For each slice along d of the contiguous `a` (outer x n x inner), its n keys -> out's positions (k of them along d).
template <typename T, typename K>
void order_slices(const Tensor& a, const Tensor& out, int64_t d, int64_t k, bool descending) {
  const AroundDim around = around_dim(a->shape, d);
  const int64_t outer = around.outer, n = around.n, inner = around.inner;
  const T* x = a->data<T>();
  int64_t* y = out->data<int64_t>();
  const int64_t slices = outer * inner;
  const int64_t grain = std::max<int64_t>(1, parallel_grain() / std::max<int64_t>(n, 1));
  parallel_for(slices, [&](int64_t lo, int64_t hi) {
    std::vector<K> keys, keys2;
    std::vector<int64_t> pos, pos2;
    std::vector<KeyedPosition<K>> pairs;
    for (int64_t s = lo; s < hi; ++s) {
      const int64_t o = s / inner, i = s % inner;
      const T* row = x + o * n * inner + i;
      int64_t* dst = y + o * k * inner + i;
      auto key_of = [&](int64_t j) {
        K key = order_key(row[j * inner]);
        return descending ? (K)~key : key;
      };
      if (k == n && n >= kRadixFrom) {
        keys.resize(n);
        pos.resize(n);
        for (int64_t j = 0; j < n; ++j) {
          keys[j] = key_of(j);
          pos[j] = j;
        }
        radix_sort(keys, pos, keys2, pos2);
        for (int64_t j = 0; j < n; ++j) dst[j * inner] = pos[j];
        continue;
      }
      pairs.resize(n);
      for (int64_t j = 0; j < n; ++j) pairs[j] = {key_of(j), j};
      if (k < n) std::nth_element(pairs.begin(), pairs.begin() + k, pairs.end());
      std::sort(pairs.begin(), pairs.begin() + k);
      for (int64_t j = 0; j < k; ++j) dst[j * inner] = pairs[j].pos;
    }
  }, grain);
}

Tensor order_kernel(const Tensor& a_in, int64_t d, int64_t k, bool descending) {
  // the key types: float32 (halves are exact in it), float64, int64 (the other integers and bool)
  DType key_dtype = a_in->dtype == DType::Float64 ? DType::Float64
                    : (is_half(a_in->dtype) || a_in->dtype == DType::Float32) ? DType::Float32
                                                                              : DType::Int64;
  Tensor a = a_in->dtype == key_dtype ? contiguous_data(a_in) : contiguous_copy(a_in, key_dtype);
  Shape out_shape = a->shape;
  if (!out_shape.empty()) out_shape[d] = k;
  Tensor out = empty(out_shape, DType::Int64);
  if (out->numel == 0) return out;
  switch (key_dtype) {
    case DType::Float32: order_slices<float, uint32_t>(a, out, d, k, descending); break;
    case DType::Float64: order_slices<double, uint64_t>(a, out, d, k, descending); break;
    default: order_slices<int64_t, uint64_t>(a, out, d, k, descending); break;
  }
  return out;
}

}  // namespace

Tensor sort_order_kernel(const Tensor& a, int64_t d, bool descending) {
  return order_kernel(a, d, a->ndim() ? a->shape[d] : 1, descending);
}

Tensor topk_order_kernel(const Tensor& a, int64_t d, int64_t k, bool largest) {
  return order_kernel(a, d, k, largest);
}

}  // namespace dyngrad
