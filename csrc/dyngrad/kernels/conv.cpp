// conv.cpp: im2col and its adjoint col2im, which turn conv2d and average pooling into matrix products and
// reductions; and the positions of max pooling's maxima.
//   cols[n, (c, i, j), (oh, ow)] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]   (0 outside the image)
// with dilation (dh, dw) spacing the kernel's taps; OH = (H + 2*ph - dh*(kh-1) - 1) / sh + 1 (likewise OW).
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

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

template <typename T>
void im2col_typed(const Window& g, const T* src, T* dst, bool parallel) {
  const int64_t rows = g.N * g.C * g.kh * g.kw;
  parallel_for(rows, [&](int64_t lo, int64_t hi) {
  for (int64_t r = lo; r < hi; ++r) {
    int64_t j = r % g.kw, i = (r / g.kw) % g.kh, c = (r / (g.kw * g.kh)) % g.C, n = r / (g.kw * g.kh * g.C);
    const T* img = src + (n * g.C + c) * g.H * g.W;
    T* o = dst + r * g.OH * g.OW;
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

template <typename T>
void col2im_typed(const Window& g, const T* src, T* dst, bool parallel) {
  // parallel over (n, c) images: each writes only its own image
  parallel_for(g.N * g.C, [&](int64_t lo, int64_t hi) {
  for (int64_t nc = lo; nc < hi; ++nc) {
    T* img = dst + nc * g.H * g.W;
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* col = src + ((nc * g.kh + i) * g.kw + j) * g.OH * g.OW;
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
// everything after it (`v > best || isnan(v)`), so a window with a NaN gives NaN.
template <typename T>
void max_pool_positions_typed(const Window& g, const T* src, int64_t* dst, bool parallel) {
  parallel_for(g.N * g.C, [&](int64_t lo, int64_t hi) {
  // per output row: the running maximum and its tap of every window, updated one tap at a time across the row
  // (a loop over ow with selects, which vectorises; per window, a branch on random data mispredicts)
  std::vector<T> best(g.OW);
  std::vector<int32_t> tap(g.OW);
  for (int64_t nc = lo; nc < hi; ++nc) {
    const int64_t base = nc * g.H * g.W;
    const T* img = src + base;
    int64_t* o = dst + nc * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t h0 = oh * g.sh - g.ph;
      std::fill(best.begin(), best.end(), -std::numeric_limits<T>::infinity());
      std::fill(tap.begin(), tap.end(), -1);
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t h = h0 + i;
        if (h < 0 || h >= g.H) continue;
        const T* row = img + h * g.W;
        for (int64_t j = 0; j < g.kw; ++j) {
          const int32_t t = (int32_t)(i * g.kw + j);
          // the windows whose tap (i, j) is inside the image: w = ow*sw - pw + j in [0, W)
          const int64_t first = std::max<int64_t>(0, (g.pw - j + g.sw - 1) / g.sw);
          const int64_t last = std::min<int64_t>(g.OW, (g.W - 1 + g.pw - j) / g.sw + 1);
          const T* x = row - g.pw + j;
          T* b = best.data();
          int32_t* k = tap.data();
          const int64_t sw = g.sw;
          for (int64_t ow = first; ow < last; ++ow) {
            const T v = x[ow * sw];
            const bool wins = (v > b[ow]) | (v != v) | (k[ow] < 0);  // a NaN wins; so does a window's first tap
            b[ow] = wins ? v : b[ow];
            k[ow] = wins ? t : k[ow];
          }
        }
      }
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t i = tap[ow] / g.kw, j = tap[ow] % g.kw;
        o[oh * g.OW + ow] = base + (h0 + i) * g.W + (ow * g.sw - g.pw + j);
      }
    }
  }
  }, parallel ? 2 : INT64_MAX);
}
}  // namespace

Tensor max_pool2d_positions_kernel(const Tensor& x_in, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                   int64_t pw) {
  Tensor x = contiguous_data(x_in);
  Window g = make_window(x->shape, kh, kw, sh, sw, ph, pw, 1, 1);
  Tensor positions = empty({g.N, g.C, g.OH, g.OW}, DType::Int64);
  bool parallel = x->numel >= parallel_grain();
  DG_DISPATCH_FLOAT(x->dtype, T, max_pool_positions_typed<T>(g, x->data<T>(), positions->data<int64_t>(), parallel));
  return positions;
}

Tensor im2col_kernel(const Tensor& x_in, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                     int64_t dh, int64_t dw) {
  Tensor x = contiguous_data(x_in);
  Window g = make_window(x->shape, kh, kw, sh, sw, ph, pw, dh, dw);
  Tensor cols = empty({g.N, g.C * kh * kw, g.OH * g.OW}, x->dtype);
  bool parallel = cols->numel >= parallel_grain();
  DG_DISPATCH_FLOAT(x->dtype, T, im2col_typed<T>(g, x->data<T>(), cols->data<T>(), parallel));
  return cols;
}

Tensor col2im_kernel(const Tensor& cols_in, const Shape& input_shape, int64_t kh, int64_t kw, int64_t sh,
                     int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  Tensor cols = contiguous_data(cols_in);
  Window g = make_window(input_shape, kh, kw, sh, sw, ph, pw, dh, dw);
  Tensor x = zeros(input_shape, cols->dtype);
  bool parallel = cols->numel >= parallel_grain();
  DG_DISPATCH_FLOAT(cols->dtype, T, col2im_typed<T>(g, cols->data<T>(), x->data<T>(), parallel));
  return x;
}

}  // namespace dyngrad
