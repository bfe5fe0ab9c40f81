// fft.h: the discrete Fourier transform of our own (fft.cpp, Note [FFT plans]), over complex numbers stored as
// interleaved (re, im) pairs: a complex tensor is a real float32/float64 tensor with a trailing dim of 2 (the
// layout torch's view_as_real gives). No autograd: the shared layer (python/dyngrad/_api/ops/fft.py) builds the
// public dyngrad.fft on these three transforms.
#pragma once
#include <string>
#include <vector>

#include "../tensor.h"

namespace dyngrad {

// The scale of a transform over N points: "backward" leaves the forward unscaled and divides the inverse by N,
// "forward" the opposite, "ortho" divides both by sqrt(N) (torch.fft's norm=). ValueError naming `op` otherwise.
enum class FftNorm { Backward, Ortho, Forward };
FftNorm parse_fft_norm(const std::string& norm, const char* op);

// X[k] = sum_j x[j] exp(-+2 pi i jk / n) over each of `dims` (dims of the complex shape, i.e. x's shape without its
// trailing 2; wrapped, distinct, each of size >= 1): the forward transform (minus sign) or the inverse (plus).
// x is float32 or float64 of shape (..., 2); the result is a fresh contiguous tensor of x's shape and dtype.
Tensor fft_c2c(const Tensor& x, const std::vector<int64_t>& dims, bool forward, FftNorm norm);
// The transform of a real float32/float64 x over `dims`: of shape x.shape + (2,), the last of dims cut to
// n // 2 + 1 when onesided. forward=false gives the inverse transform of real x (torch.fft.ihfft): the conjugate.
Tensor fft_r2c(const Tensor& x, const std::vector<int64_t>& dims, bool forward, FftNorm norm, bool onesided);
// The real signal whose transform over `dims` has x (..., 2) as its non-redundant half: x's size along the last of
// dims must be last_dim_size // 2 + 1; the result has last_dim_size there and no trailing 2. The imaginary parts
// of the terms that must be real (0 and, for even sizes, the Nyquist term) are ignored, as numpy and torch do.
// forward=false is the inverse transform (irfft), forward=true the forward transform of a Hermitian signal (hfft).
Tensor fft_c2r(const Tensor& x, const std::vector<int64_t>& dims, bool forward, FftNorm norm, int64_t last_dim_size);

// How the plan of an n-point transform is made, for tests and the bench: "stockham 4x4x2" (the radices in stage
// order) or "bluestein m=..." over a Stockham plan of m points.
std::string fft_plan_description(int64_t n, bool double_precision);
// Plans kept now (both precisions), and dropping them.
int64_t fft_cached_plan_count();
void fft_clear_plan_cache();

}  // namespace dyngrad
