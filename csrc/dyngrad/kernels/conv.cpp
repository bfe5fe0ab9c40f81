// conv.cpp: im2col and its adjoint col2im, which turn conv2d and pooling into matrix products and reductions.
//   cols[n, (c, i, j), (oh, ow)] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]   (0 outside the image)
// with dilation (dh, dw) spacing the kernel's taps; OH = (H + 2*ph - dh*(kh-1) - 1) / sh + 1 (likewise OW).
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

template <typename T>
void im2col_typed(const Window& g, const T* src, T* dst, bool parallel) {
  const int64_t rows = g.N * g.C * g.kh * g.kw;
  parallel_for(rows, [&](int64_t lo, int64_t hi) {
  for (int64_t r = lo; r < hi; ++r) {
    int64_t j = r % g.kw, i = (r / g.kw) % g.kh, c = (r / (g.kw * g.kh)) % g.C, n = r / (g.kw * g.kh * g.C);
    const T* img = src + (n * g.C + c) * g.H * g.W;
    T* o = dst + r * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      int64_t h = oh * g.sh - g.ph + i * g.dh;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        int64_t w = ow * g.sw - g.pw + j * g.dw;
        o[oh * g.OW + ow] = (h >= 0 && h < g.H && w >= 0 && w < g.W) ? img[h * g.W + w] : T(0);
      }
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
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          int64_t h = oh * g.sh - g.ph + i * g.dh;
          if (h < 0 || h >= g.H) continue;
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            int64_t w = ow * g.sw - g.pw + j * g.dw;
            if (w >= 0 && w < g.W) img[h * g.W + w] += col[oh * g.OW + ow];
          }
        }
      }
  }
  }, parallel ? 2 : INT64_MAX);
}
}  // namespace

Tensor im2col_kernel(const Tensor& x_in, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                     int64_t dh, int64_t dw) {
  Tensor x = contiguous_data(x_in);
  Window g = make_window(x->shape, kh, kw, sh, sw, ph, pw, dh, dw);
  Tensor cols = empty({g.N, g.C * kh * kw, g.OH * g.OW}, x->dtype);
  bool parallel = cols->numel >= kParallelGrain;
  DG_DISPATCH_FLOAT(x->dtype, T, im2col_typed<T>(g, x->data<T>(), cols->data<T>(), parallel));
  return cols;
}

Tensor col2im_kernel(const Tensor& cols_in, const Shape& input_shape, int64_t kh, int64_t kw, int64_t sh,
                     int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  Tensor cols = contiguous_data(cols_in);
  Window g = make_window(input_shape, kh, kw, sh, sw, ph, pw, dh, dw);
  Tensor x = zeros(input_shape, cols->dtype);
  bool parallel = cols->numel >= kParallelGrain;
  DG_DISPATCH_FLOAT(cols->dtype, T, col2im_typed<T>(g, cols->data<T>(), x->data<T>(), parallel));
  return x;
}

}  // namespace dyngrad
