// sort.cpp: the orders of sort, argsort and topk along one dim.
//
// Note [Sorting by keys]: every element becomes an unsigned integer key whose unsigned order is the order wanted
// (floats: the sign bit flipped, negatives' other bits too; -0.0 as 0.0; NaN the largest key; integers: the sign
// bit flipped; descending: the keys complemented, which puts NaN first as torch does). Rows of at least
// kRadixFrom elements sort with an LSD radix sort of 8-bit digits, stable by construction, which skips the digits
// all keys share; shorter rows sort (key, position) pairs with std::sort (introsort). With stable=True the
// positions break ties, which gives the stable order whatever the algorithm (numpy's stable argsort, the reference
// engine's); with stable=False introsort compares keys alone, which is not stable (ties come out in any order, as
// torch's stable=False) and 10-15% faster. Below 17 elements introsort is an insertion sort, stable either way, as
// torch's is. Whole float32 rows shorter than kRadixFrom sort 64-bit words (key << 32 | position) instead: one
// integer compare, the stable order either way. Measured (standalone, 1 thread; loaded machine): introsort of pairs by keys alone 2.6 us at 64
// elements, 11.7 at 256 (radix 5.9, 14.6), with the tie-break 2.9, 13.6; from 4096 on the radix sort is 3-4x
// faster than either. topk of a row of at least 64 with 4k <= n selects in one pass over the keys (select_first:
// candidates below the k-th kept key, compacted by nth_element), else by std::nth_element over all the pairs, and
// sorts only the k chosen (O(n + k log k)), ties to the earlier position. Measured by bench/prims.py (the sort and
// topk rows: 1M float32, k = 5, one thread, 8.8 -> 1.7 ms with the one pass, numpy's argpartition 2.6-6 ms).
#include "sort.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
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
  static bool by_key(const KeyedPosition& a, const KeyedPosition& b) { return a.key < b.key; }
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

// The first k (0 < k < n) of the (key, position) order of a row into buf, sorted: one pass keeping the candidates
// whose key is below `bound`, the k-th key among the kept (an element equal to it comes later than every kept one,
// so it cannot be among the first k), compacted to the k best by nth_element when buf fills. On a long row almost
// every element costs a key and one well-predicted compare.
template <typename K, typename KeyOf>
void select_first(int64_t n, int64_t k, KeyOf key_of, std::vector<KeyedPosition<K>>& buf) {
  const size_t cap = (size_t)std::max<int64_t>(2 * k, k + 256);
  buf.clear();
  buf.reserve(cap);
  for (int64_t j = 0; j < k; ++j) buf.push_back({key_of(j), j});
  K bound = std::max_element(buf.begin(), buf.end())->key;
  for (int64_t j = k; j < n; ++j) {
    const K key = key_of(j);
    if (key < bound) {
      buf.push_back({key, j});
      if (buf.size() == cap) {
        std::nth_element(buf.begin(), buf.begin() + (k - 1), buf.end());
        buf.resize((size_t)k);
        bound = buf[(size_t)k - 1].key;
      }
    }
  }
  if ((int64_t)buf.size() > k) std::nth_element(buf.begin(), buf.begin() + k, buf.end());
  std::sort(buf.begin(), buf.begin() + k);
}

// For each slice along d of the contiguous `a` (outer x n x inner), its n keys -> out's positions (k of them along d).
template <typename T, typename K>
void order_slices(const Tensor& a, const Tensor& out, T* values, int64_t d, int64_t k, bool descending, bool stable) {
  const AroundDim around = around_dim(a->shape, d);
  const int64_t outer = around.outer, n = around.n, inner = around.inner;
  const T* x = a->data<T>();
  int64_t* y = out->data<int64_t>();
  const int64_t slices = outer * inner;
  const int64_t grain = std::max<int64_t>(1, parallel_grain() / std::max<int64_t>(n, 1));
  parallel_for(slices, [&](int64_t lo, int64_t hi) {
    std::vector<K> keys, keys2;
    std::vector<int64_t> pos, pos2;
    // short rows reuse this thread's scratch (a heap allocation is a tenth of a 16-element sort); long ones own
    // theirs, so that no thread keeps a large buffer
    thread_local std::vector<KeyedPosition<K>> short_pairs;
    std::vector<KeyedPosition<K>> long_pairs;
    std::vector<KeyedPosition<K>>& pairs = n <= 4096 ? short_pairs : long_pairs;
    for (int64_t s = lo; s < hi; ++s) {
      const int64_t o = s / inner, i = s % inner;
      const T* row = x + o * n * inner + i;
      int64_t* dst = y + o * k * inner + i;
      T* vdst = values ? values + o * k * inner + i : nullptr;
      // the positions of the first k, and their elements where asked
      auto emit = [&](int64_t j, int64_t p) {
        dst[j * inner] = p;
        if (vdst) vdst[j * inner] = row[p * inner];
      };
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
        for (int64_t j = 0; j < n; ++j) emit(j, pos[j]);
        continue;
      }
      if constexpr (sizeof(K) == 4) {
        if (k == n) {  // a short float32 row: (key << 32 | position) words sort by key, then position
          thread_local std::vector<uint64_t> packed;
          packed.resize(n);
          for (int64_t j = 0; j < n; ++j) packed[j] = ((uint64_t)key_of(j) << 32) | (uint64_t)j;
          std::sort(packed.begin(), packed.end());
          for (int64_t j = 0; j < n; ++j) emit(j, (int64_t)(packed[j] & 0xFFFFFFFFu));
          continue;
        }
      }
      if (k > 0 && k < n && n >= 64 && 4 * k <= n) {
        select_first<K>(n, k, key_of, pairs);
        for (int64_t j = 0; j < k; ++j) emit(j, pairs[j].pos);
        continue;
      }
      pairs.resize(n);
      for (int64_t j = 0; j < n; ++j) pairs[j] = {key_of(j), j};
      if (k < n) std::nth_element(pairs.begin(), pairs.begin() + k, pairs.end());
      if (stable) std::sort(pairs.begin(), pairs.begin() + k);
      else std::sort(pairs.begin(), pairs.begin() + k, KeyedPosition<K>::by_key);
      for (int64_t j = 0; j < k; ++j) emit(j, pairs[j].pos);
    }
  }, grain);
}

Tensor order_kernel(const Tensor& a_in, int64_t d, int64_t k, bool descending, bool stable, Tensor* values) {
  // the key types: float32 (halves are exact in it), float64, int64 (the other integers and bool)
  DType key_dtype = a_in->dtype == DType::Float64 ? DType::Float64
                    : (is_half(a_in->dtype) || a_in->dtype == DType::Float32) ? DType::Float32
                                                                              : DType::Int64;
  Tensor a = a_in->dtype == key_dtype ? contiguous_data(a_in) : contiguous_copy(a_in, key_dtype);
  Shape out_shape = a->shape;
  if (!out_shape.empty()) out_shape[d] = k;
  Tensor out = empty(out_shape, DType::Int64);
  if (values) *values = a_in->dtype == key_dtype ? empty(out_shape, key_dtype) : Tensor();
  if (out->numel == 0) return out;
  auto vals = [&](auto* type) -> decltype(type) {
    return values && *values ? (*values)->template data<std::remove_pointer_t<decltype(type)>>() : nullptr;
  };
  switch (key_dtype) {
    case DType::Float32: order_slices<float, uint32_t>(a, out, vals((float*)nullptr), d, k, descending, stable); break;
    case DType::Float64: order_slices<double, uint64_t>(a, out, vals((double*)nullptr), d, k, descending, stable); break;
    default: order_slices<int64_t, uint64_t>(a, out, vals((int64_t*)nullptr), d, k, descending, stable); break;
  }
  return out;
}

}  // namespace

Tensor sort_order_kernel(const Tensor& a, int64_t d, bool descending, bool stable, Tensor* values) {
  return order_kernel(a, d, a->ndim() ? a->shape[d] : 1, descending, stable, values);
}

Tensor topk_order_kernel(const Tensor& a, int64_t d, int64_t k, bool largest, Tensor* values) {
  return order_kernel(a, d, k, largest, true, values);
}

}  // namespace dyngrad
