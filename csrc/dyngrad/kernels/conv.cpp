// conv.cpp: im2col and its adjoint col2im (in unfold's layout or conv2d's, Note [Columns layout]), which turn conv2d and average pooling into matrix products and
// reductions; and the positions of max pooling's maxima.
//   cols[n, (c, i, j), (oh, ow)] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]   (0 outside the image)
// with dilation (dh, dw) spacing the kernel's taps; OH = (H + 2*ph - dh*(kh-1) - 1) / sh + 1 (likewise OW).
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "conv.h"
#include "loop.h"

namespace dyngrad {

namespace {
struct Window {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW;
};

Window make_window(const Shape& s, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                   int64_t dh, int64_t dw) {
  Window w{s[0], s[1], s[2], s[3], kh, kw, sh, sw, ph, pw, dh, dw, 0, 0};
  w.OH = (w.H + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
  w.OW = (w.W + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  return w;
}

// The output positions ow whose tap w = ow*sw - pw + j*dw lies inside [0, W): [first, last). Every loop below
// runs over that range without a per-element bounds test, so that it vectorises (contiguous when sw == 1).
inline std::pair<int64_t, int64_t> inside(const Window& g, int64_t j) {
  const int64_t off = g.pw - j * g.dw;  // w = ow*sw - off
  const int64_t first = off > 0 ? (off + g.sw - 1) / g.sw : 0;
  const int64_t last = g.W + off > 0 ? std::min(g.OW, (g.W - 1 + off) / g.sw + 1) : 0;
  return {std::min(first, last), last};
}

// Note [Columns layout]: the columns of image n and row k = (c, i, j) start at cols + n*sn + k*sk, each OH*OW
// contiguous. unfold's own layout is (N, C*kh*kw, L) (sn = C*kh*kw*L, sk = L); conv2d's is (C*kh*kw, N, L) (sn = L,
// sk = N*L), so that its product is one (O, K) @ (K, N*L) for the whole batch (Note [conv2d as one product] in
// ops_nn.cpp), and col2im reads either.
struct ColsLayout {
  int64_t sn, sk;
};

// Note [Padded image rows]: im2col and col2im work image by image, (n, c) per task, on a zero-padded copy of the
// image (Hp x Wp, in a per-thread scratch), so that every row of a column is one run of OW taps x[ow*sw] with no
// bounds test and no zero fill: the per-row ranges and fills of the general loop (below) cost more than the copy
// for LeNet's small maps (OW 10-28; im2col was 13% of its training step, col2im 7%). Used while the padded image
// is at most kPaddedImage elements (not for a 2**19 padding).
constexpr int64_t kPaddedImage = int64_t(1) << 20;
inline bool padded_rows_pay(const Window& g) {
  return (g.H + 2 * g.ph) * (g.W + 2 * g.pw) <= kPaddedImage;
}

// Where the CPU has AVX-512F, float32 rows of columns are copied (im2col) and summed (col2im) with masked vector
// loads and stores (a LeNet row is 10-28 floats: no scalar tail); the build may be for any x86-64.
bool cpu_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return yes;
}

__attribute__((target("avx512f"))) void copy_row_avx512(float* __restrict o, const float* __restrict r,
                                                         int64_t len) {
  int64_t w = 0;
  for (; w + 16 <= len; w += 16) _mm512_storeu_ps(o + w, _mm512_loadu_ps(r + w));
  if (w < len) {
    const __mmask16 m = (__mmask16)((1u << (len - w)) - 1);
    _mm512_mask_storeu_ps(o + w, m, _mm512_maskz_loadu_ps(m, r + w));
  }
}

// col2im's row of a padded image for one kernel row i, stride and dilation 1: r[ow + j] += col[j][ow] for the
// kw taps j = 0, 1, ... in that order (the scalar loop's order: the same bits), over r[0, OW + kw - 1). Summed in
// registers, one load and one store of r per 16 floats: adding each tap's row to r in memory (a masked store,
// then the next tap's load of an overlapping range) defeated store-to-load forwarding and was 1.7x slower than the
// scalar loop (fold of LeNet's (64, 150, 100) columns). A lane a tap does not reach adds +0 from the masked load,
// which leaves r as it is (r never holds -0: it starts at +0 and x + (-x) = +0).
__attribute__((target("avx512f"))) void add_taps_avx512(float* __restrict r, const float* const* col, int64_t kw,
                                                         int64_t OW) {
  const int64_t span = OW + kw - 1;
  for (int64_t v = 0; v < span; v += 16) {
    const int64_t lanes = std::min<int64_t>(16, span - v);
    const __mmask16 keep = (__mmask16)((1u << lanes) - 1);
    __m512 acc = _mm512_maskz_loadu_ps(keep, r + v);
    for (int64_t j = 0; j < kw; ++j) {
      const int64_t lo = std::max<int64_t>(0, j - v), hi = std::min<int64_t>(16, j + OW - v);  // v + l - j in [0, OW)
      if (hi <= lo) continue;
      const __mmask16 m = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
      acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, col[j] + v - j));
    }
    _mm512_mask_storeu_ps(r + v, keep, acc);
  }
}

template <typename T>
void im2col_padded(const Window& g, const T* src, T* dst, ColsLayout lay, bool parallel) {
  const int64_t Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw, OW = g.OW, sw = g.sw;
  const bool pad = g.ph > 0 || g.pw > 0;
  parallel_for(g.N * g.C, [&](int64_t lo, int64_t hi) {
    std::vector<T> scratch(pad ? Hp * Wp : 0, T(0));
    // one masked copy per row (OW <= 16): LeNet's second map (OW 10) 1.25x faster than the compiler's loop; on
    // its first (OW 28) a vector and a masked tail were slower than the loop
    const bool vec = std::is_same_v<T, float> && sw == 1 && OW <= 16 && cpu_avx512();
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / g.C, c = t % g.C;
      const T* img = src + (n * g.C + c) * g.H * g.W;
      if (pad) {  // the border stays zero from the first image on
        for (int64_t h = 0; h < g.H; ++h)
          std::copy(img + h * g.W, img + (h + 1) * g.W, scratch.data() + (h + g.ph) * Wp + g.pw);
        img = scratch.data();
      }
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          T* __restrict o = dst + n * lay.sn + ((c * g.kh + i) * g.kw + j) * lay.sk;
          const T* x = img + i * g.dh * Wp + j * g.dw;
          for (int64_t oh = 0; oh < g.OH; ++oh, o += OW) {
            const T* __restrict r = x + oh * g.sh * Wp;
            if constexpr (std::is_same_v<T, float>)
              if (vec) {
                copy_row_avx512(o, r, OW);
                continue;
              }
            if (sw == 1)
              for (int64_t ow = 0; ow < OW; ++ow) o[ow] = r[ow];
            else
              for (int64_t ow = 0; ow < OW; ++ow) o[ow] = r[ow * sw];
          }
        }
    }
  }, parallel ? 2 : INT64_MAX);
}

template <typename T>
void im2col_typed(const Window& g, const T* src, T* dst, ColsLayout lay, bool parallel) {
  if (padded_rows_pay(g)) return im2col_padded(g, src, dst, lay, parallel);
  const int64_t rows = g.N * g.C * g.kh * g.kw;
  parallel_for(rows, [&](int64_t lo, int64_t hi) {
  for (int64_t r = lo; r < hi; ++r) {
    int64_t j = r % g.kw, i = (r / g.kw) % g.kh, c = (r / (g.kw * g.kh)) % g.C, n = r / (g.kw * g.kh * g.C);
    const T* img = src + (n * g.C + c) * g.H * g.W;
    T* o = dst + n * lay.sn + (r % (g.C * g.kh * g.kw)) * lay.sk;
    const auto [first, last] = inside(g, j);
    const int64_t sw = g.sw, shift = j * g.dw - g.pw;
    for (int64_t oh = 0; oh < g.OH; ++oh, o += g.OW) {
      int64_t h = oh * g.sh - g.ph + i * g.dh;
      if (h < 0 || h >= g.H) {
        std::fill(o, o + g.OW, T(0));
        continue;
      }
      const T* x = img + h * g.W + shift;
      std::fill(o, o + first, T(0));
      if (sw == 1)
        for (int64_t ow = first; ow < last; ++ow) o[ow] = x[ow];
      else
        for (int64_t ow = first; ow < last; ++ow) o[ow] = x[ow * sw];
      std::fill(o + last, o + g.OW, T(0));
    }
  }
  }, parallel ? 2 : INT64_MAX);
}

// Each element of an image sums its taps in the order (i, j) of the kernel (one tap per (i, j) at most), on both
// paths and whatever the thread count: the same bits.
constexpr int64_t kMaxVectorTaps = 16;
template <typename T>
void col2im_padded(const Window& g, const T* src, T* dst, ColsLayout lay, bool parallel) {
  const int64_t Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw, OW = g.OW, sw = g.sw;
  parallel_for(g.N * g.C, [&](int64_t lo, int64_t hi) {
    std::vector<T> scratch(Hp * Wp);
    const bool vec = std::is_same_v<T, float> && sw == 1 && g.dw == 1 && g.kw <= kMaxVectorTaps && cpu_avx512();
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / g.C, c = t % g.C;
      std::fill(scratch.begin(), scratch.end(), T(0));
      if constexpr (std::is_same_v<T, float>)
        if (vec) {
          const float* taps[kMaxVectorTaps];
          for (int64_t i = 0; i < g.kh; ++i) {
            for (int64_t j = 0; j < g.kw; ++j) taps[j] = src + n * lay.sn + ((c * g.kh + i) * g.kw + j) * lay.sk;
            for (int64_t oh = 0; oh < g.OH; ++oh) {
              add_taps_avx512(scratch.data() + (oh * g.sh + i * g.dh) * Wp, taps, g.kw, OW);
              for (int64_t j = 0; j < g.kw; ++j) taps[j] += OW;
            }
          }
        }
      for (int64_t i = 0; i < g.kh && !vec; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          const T* __restrict col = src + n * lay.sn + ((c * g.kh + i) * g.kw + j) * lay.sk;
          T* x = scratch.data() + i * g.dh * Wp + j * g.dw;
          for (int64_t oh = 0; oh < g.OH; ++oh, col += OW) {
            T* __restrict r = x + oh * g.sh * Wp;
            if (sw == 1)
              for (int64_t ow = 0; ow < OW; ++ow) r[ow] += col[ow];
            else
              for (int64_t ow = 0; ow < OW; ++ow) r[ow * sw] += col[ow];
          }
        }
      T* img = dst + (n * g.C + c) * g.H * g.W;
      for (int64_t h = 0; h < g.H; ++h) {
        const T* r = scratch.data() + (h + g.ph) * Wp + g.pw;
        std::copy(r, r + g.W, img + h * g.W);
      }
    }
  }, parallel ? 2 : INT64_MAX);
}

template <typename T>
void col2im_typed(const Window& g, const T* src, T* dst, ColsLayout lay, bool parallel) {
  if (padded_rows_pay(g)) return col2im_padded(g, src, dst, lay, parallel);
  // parallel over (n, c) images: each writes only its own image
  parallel_for(g.N * g.C, [&](int64_t lo, int64_t hi) {
  for (int64_t nc = lo; nc < hi; ++nc) {
    T* img = dst + nc * g.H * g.W;
    const int64_t n = nc / g.C, c = nc % g.C;
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* col = src + n * lay.sn + ((c * g.kh + i) * g.kw + j) * lay.sk;
        const auto [first, last] = inside(g, j);
        const int64_t sw = g.sw, shift = j * g.dw - g.pw;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          int64_t h = oh * g.sh - g.ph + i * g.dh;
          if (h < 0 || h >= g.H) continue;
          T* x = img + h * g.W + shift;
          const T* c = col + oh * g.OW;
          if (sw == 1)
            for (int64_t ow = first; ow < last; ++ow) x[ow] += c[ow];
          else
            for (int64_t ow = first; ow < last; ++ow) x[ow * sw] += c[ow];
        }
      }
  }
  }, parallel ? 2 : INT64_MAX);
}

// Note [Max pooling by positions]: max_pool2d = take(x, positions), positions being the flat index in x of each
// window's maximum: the forward reads x once (no unfolded copy), and the gradient is take's adjoint, a scatter of
// the pooled gradient into zeros of x's shape (no window-sized tensors either way). As torch's CPU kernel: padded
// taps never win, the running maximum starts at -inf on the window's first real tap, and a NaN wins over
// everything after it (`v > best || isnan(v)`), so a window with a NaN gives NaN. A kernel may be far larger than
// the input (ResNet's 3x3 stem pool on a 1x1 map, or 2**20 with padding 2**19 on 4x4): only the taps that can land
// inside the image are visited (the row and column ranges below), and the range of windows each tap reaches is
// inside()'s, whose floor division keeps a tap right of the image from reaching any window (a truncating one once
// let it read the next channel's first element). The padding check (at most half the kernel) gives every window
// at least one real tap. float16 / bfloat16 compare as float32, which is exact (Note [Half types]).
// With `vals`, also each window's maximum, x at its position, read while the image's rows are in cache (Note
// [Max pooling in one pass]).
template <typename T, typename Tap>
void max_pool_positions_typed(const Window& g, const T* src, int64_t* dst, T* vals, bool parallel) {
  using Compute = std::conditional_t<is_half_type_v<T>, float, T>;
  // the kernel columns j that some window's tap w = ow*sw - pw + j can put inside [0, W)
  const int64_t j_lo = std::max<int64_t>(0, g.pw - (g.OW - 1) * g.sw), j_hi = std::min(g.kw, g.W + g.pw);
  const int64_t jn = j_hi - j_lo;
  if (g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0) {
    // Note [Max pooling 2x2]: the common pool (LeNet's, VGG's, ResNet's downsamples) with every window inside the
    // image: its four taps compared in the general loop's order (row by row, the first tap starting the maximum,
    // `v > best || isnan(v)` after it), the same positions. The general loop's per-row passes over strided taps
    // and a division per output took 12% of a LeNet training step; max_pool2d of (64, 6, 28, 28): 645 -> 236 us of
    // CPU time (Xeon family 6 model 167, 1 thread, 2026-12-03).
    parallel_for(g.N * g.C, [&](int64_t lo, int64_t hi) {
      std::vector<int32_t> tap(g.OW);  // per output of a row: 0, 1 (top row), 2, 3 (bottom row)
      for (int64_t nc = lo; nc < hi; ++nc) {
        const int64_t base = nc * g.H * g.W;
        const T* img = src + base;
        int64_t* o = dst + nc * g.OH * g.OW;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const T *r0 = img + 2 * oh * g.W, *r1 = r0 + g.W;
          int32_t* k = tap.data();
          for (int64_t ow = 0; ow < g.OW; ++ow) {  // selects, not branches (random data mispredicts): vectorises
            const Compute a = (Compute)r0[2 * ow], b = (Compute)r0[2 * ow + 1];
            const Compute c = (Compute)r1[2 * ow], d = (Compute)r1[2 * ow + 1];
            Compute best = a;
            int32_t at = 0;
            bool wins = (b > best) | (b != b);
            best = wins ? b : best, at = wins ? 1 : at;
            wins = (c > best) | (c != c);
            best = wins ? c : best, at = wins ? 2 : at;
            wins = (d > best) | (d != d);
            k[ow] = wins ? 3 : at;
          }
          const int64_t p0 = base + 2 * oh * g.W, W = g.W;
          int64_t* out_row = o + oh * g.OW;
          for (int64_t ow = 0; ow < g.OW; ++ow) out_row[ow] = p0 + 2 * ow + (k[ow] & 1) + (k[ow] >> 1) * W;
          if (vals) {
            T* v = vals + (out_row - dst);
            for (int64_t ow = 0; ow < g.OW; ++ow) v[ow] = src[out_row[ow]];
          }
        }
      }
    }, parallel ? 2 : INT64_MAX);
    return;
  }
  parallel_for(g.N * g.C, [&](int64_t lo, int64_t hi) {
  // per output row: the running maximum and its tap of every window, updated one tap at a time across the row (a
  // loop over ow with selects, which vectorises; per window, a branch on random data mispredicts). A tap is
  // numbered (h - h_first) * jn + (j - j_lo) over the rows and columns visited, a constant in the inner loop.
  std::vector<Compute> best(g.OW);
  std::vector<Tap> tap(g.OW);
  for (int64_t nc = lo; nc < hi; ++nc) {
    const int64_t base = nc * g.H * g.W;
    const T* img = src + base;
    int64_t* o = dst + nc * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t h_first = std::max<int64_t>(0, oh * g.sh - g.ph), h_end = std::min(g.H, oh * g.sh - g.ph + g.kh);
      std::fill(best.begin(), best.end(), -std::numeric_limits<Compute>::infinity());
      std::fill(tap.begin(), tap.end(), Tap(-1));
      for (int64_t h = h_first; h < h_end; ++h) {
        const T* row = img + h * g.W;
        for (int64_t j = j_lo; j < j_hi; ++j) {
          const Tap t = (Tap)((h - h_first) * jn + (j - j_lo));
          const auto [first, last] = inside(g, j);
          const T* x = row + (j - g.pw);  // tap j of window ow reads x[ow * sw], inside the row for ow in [first, last)
          Compute* b = best.data();
          Tap* k = tap.data();
          const int64_t sw = g.sw;
          for (int64_t ow = first; ow < last; ++ow) {
            const Compute v = (Compute)x[ow * sw];
            const bool wins = (v > b[ow]) | (v != v) | (k[ow] < 0);  // a NaN wins; so does a window's first tap
            b[ow] = wins ? v : b[ow];
            k[ow] = wins ? t : k[ow];
          }
        }
      }
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t i = tap[ow] / jn, j = tap[ow] % jn + j_lo;
        o[oh * g.OW + ow] = base + (h_first + i) * g.W + (ow * g.sw - g.pw + j);
      }
      if (vals) {
        T* v = vals + (o - dst) + oh * g.OW;
        for (int64_t ow = 0; ow < g.OW; ++ow) v[ow] = src[o[oh * g.OW + ow]];
      }
    }
  }
  }, parallel ? 2 : INT64_MAX);
}

template <typename T>
void max_pool_positions_typed(const Window& g, const T* src, int64_t* dst, T* vals, bool parallel) {
  // int32 taps vectorise with float32 values; a window of more than 2**31 visited taps needs int64
  if (std::min(g.kh, g.H) * std::min(g.kw, g.W + g.pw) < (int64_t(1) << 31))
    max_pool_positions_typed<T, int32_t>(g, src, dst, vals, parallel);
  else
    max_pool_positions_typed<T, int64_t>(g, src, dst, vals, parallel);
}
}  // namespace

Tensor max_pool2d_positions_kernel(const Tensor& x_in, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                   int64_t pw, Tensor* values) {
  Tensor x = contiguous_data(x_in);
  Window g = make_window(x->shape, kh, kw, sh, sw, ph, pw, 1, 1);
  Tensor positions = empty({g.N, g.C, g.OH, g.OW}, DType::Int64);
  if (values) *values = empty({g.N, g.C, g.OH, g.OW}, x->dtype);
  bool parallel = x->numel >= parallel_grain();
  int64_t* dst = positions->data<int64_t>();
  if (x->dtype == DType::Float16)
    max_pool_positions_typed<Half>(g, x->data<Half>(), dst, values ? (*values)->data<Half>() : nullptr, parallel);
  else if (x->dtype == DType::BFloat16)
    max_pool_positions_typed<BFloat16>(g, x->data<BFloat16>(), dst, values ? (*values)->data<BFloat16>() : nullptr,
                                       parallel);
  else
    DG_DISPATCH_FLOAT(x->dtype, T, max_pool_positions_typed<T>(g, x->data<T>(), dst,
                                                               values ? (*values)->data<T>() : nullptr, parallel));
  return positions;
}

Tensor max_pool2d_positions_kernel(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                   int64_t pw) {
  return max_pool2d_positions_kernel(x, kh, kw, sh, sw, ph, pw, nullptr);
}

Tensor im2col_kernel(const Tensor& x_in, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                     int64_t dh, int64_t dw, bool batch_inner) {
  Tensor x = contiguous_data(x_in);
  Window g = make_window(x->shape, kh, kw, sh, sw, ph, pw, dh, dw);
  const int64_t K = g.C * kh * kw, L = g.OH * g.OW;
  bool parallel = g.N * K * L >= parallel_grain();
  if (!batch_inner) {
    Tensor cols = empty({g.N, K, L}, x->dtype);
    DG_DISPATCH_FLOAT(x->dtype, T, im2col_typed<T>(g, x->data<T>(), cols->data<T>(), ColsLayout{K * L, L}, parallel));
    return cols;
  }
  Tensor buf = empty({K, g.N, L}, x->dtype);  // Note [Columns layout]: returned as (N, K, L) with strides (L, N*L, 1)
  DG_DISPATCH_FLOAT(x->dtype, T, im2col_typed<T>(g, x->data<T>(), buf->data<T>(), ColsLayout{L, g.N * L}, parallel));
  return make_view(buf, {g.N, K, L}, {L, g.N * L, 1}, 0);
}

Tensor col2im_kernel(const Tensor& cols_in, const Shape& input_shape, int64_t kh, int64_t kw, int64_t sh,
                     int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  // any layout whose rows of L are contiguous (Note [Columns layout]) is read in place
  const bool rows_ok = cols_in->ndim() == 3 && (cols_in->strides[2] == 1 || cols_in->shape[2] <= 1);
  Tensor cols = rows_ok ? cols_in : contiguous_data(cols_in);
  const ColsLayout lay{cols->strides[0], cols->strides[1]};
  Window g = make_window(input_shape, kh, kw, sh, sw, ph, pw, dh, dw);
  Tensor x = padded_rows_pay(g) ? empty(input_shape, cols->dtype) : zeros(input_shape, cols->dtype);
  bool parallel = cols->numel >= parallel_grain();
  DG_DISPATCH_FLOAT(cols->dtype, T, col2im_typed<T>(g, cols->data<T>(), x->data<T>(), lay, parallel));
  return x;
}

}  // namespace dyngrad
