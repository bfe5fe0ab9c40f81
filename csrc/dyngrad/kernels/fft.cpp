// fft.cpp: the discrete Fourier transform: mixed-radix Stockham plans, Bluestein for sizes with large prime
// factors, the real transforms by the half-length trick, and the drivers over strided dims of a tensor.
//
// Note [FFT plans]: an n-point complex transform is a list of Stockham stages, one per factor of n (4s first,
// then 2, 3, 5 and any other prime, each with its own butterfly; primes above 5 use the O(p^2) generic one).
// After the stages for a prefix of the factors, whose product is L, the array holds the L-point transforms of the
// R = n / L interleaved subsequences x[r::R], transform r's k-th term at position r + R k. A radix-p stage merges
// p of them (r' + q R', q < p, with R' = R / p) into one of L p points:
//     Z'_{r'}[k1 + L k2] = sum_q (w_{Lp}^{q k1} Z_{r' + q R'}[k1]) w_p^{q k2}
// reading position r' + R'(q + p k1) and writing r' + R'(k1 + L k2), so after the last stage (R = 1) the result is
// in natural order without a bit-reversal pass, and the innermost loop (over r') walks memory contiguously with
// one twiddle. Stages ping-pong between the output and one scratch buffer. Twiddles are computed in double from
// the exact angle 2 pi (q k1 mod Lp) / Lp, so float32 plans carry no accumulated rounding in their tables.
// When the generic butterflies would cost more than three smooth transforms of m >= 2n - 1 points (m of the form
// 2^a 3^b 5^c), the plan is Bluestein's: x[j] w[j], w[j] = exp(-i pi j^2 / n) (j^2 taken mod 2n, exactly), a
// circular convolution with conj(w) by two m-point transforms (the kernel's transform precomputed in double), and a
// last multiplication by w. Inverse transforms run the forward tables conjugated.
// Lines along a leading dim (a 2-D transform's columns) are gathered up to 16 at a time and transformed as one
// batch: element j of line b at j batch + b, so every stage's inner loop runs batch times longer (1024 columns of
// 1024 points: 31 ms one by one, 7.9 ms 16 at a time). Contiguous lines go one at a time, their last stages (runs
// over r' shorter than kShortRun) looping over k1 instead (1024 rows of 1024: 7.3 ms before, 4.7 after; CPU time
// on a loaded 2-core Sapphire Rapids, torch's MKL 3.2 ms).
// Plans are cached by (n, precision) (at most kMaxCachedPlans; past that the cache starts again), shared between
// threads through shared_ptr, built outside the lock.
// The real transforms of even n pack x as n/2 complex numbers z[m] = x[2m] + i x[2m+1], transform those, and
// untangle the even and odd halves with one more twiddle per term (odd n go through the complex transform).
// Measured by bench/fft.py.
#include "fft.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "../check.h"
#include "loop.h"

namespace dyngrad {

namespace {

template <typename T>
struct Cx {
  T re, im;
};
template <typename T>
inline Cx<T> operator+(Cx<T> a, Cx<T> b) { return {a.re + b.re, a.im + b.im}; }
template <typename T>
inline Cx<T> operator-(Cx<T> a, Cx<T> b) { return {a.re - b.re, a.im - b.im}; }
template <typename T>
inline Cx<T> operator*(Cx<T> a, T s) { return {a.re * s, a.im * s}; }
// a * w, or a * conj(w) for the inverse transform (the tables hold the forward's roots)
template <bool Inv, typename T>
inline Cx<T> mul(Cx<T> a, Cx<T> w) {
  if (Inv) return {a.re * w.re + a.im * w.im, a.im * w.re - a.re * w.im};
  return {a.re * w.re - a.im * w.im, a.re * w.im + a.im * w.re};
}
template <typename T>
inline Cx<T> conj(Cx<T> a) { return {a.re, -a.im}; }
// a * (i * sign): the forward transform's roots turn by -i, the inverse's by +i
template <bool Inv, typename T>
inline Cx<T> rot(Cx<T> a) {
  if (Inv) return {-a.im, a.re};
  return {a.im, -a.re};
}

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr int kMaxGenericRadix = 128;
constexpr size_t kMaxCachedPlans = 64;

template <typename T>
std::unique_ptr<Cx<T>[]> uninitialised(int64_t n) {
  return std::unique_ptr<Cx<T>[]>(new Cx<T>[(size_t)std::max<int64_t>(n, 1)]);
}

// exp(-2 pi i num / den) for 0 <= num < den
inline Cx<double> root(int64_t num, int64_t den) {
  double a = -kTwoPi * (double)num / (double)den;
  return {std::cos(a), std::sin(a)};
}

std::vector<int> factorize(int64_t n) {
  std::vector<int> f;
  while (n % 4 == 0) { f.push_back(4); n /= 4; }
  while (n % 2 == 0) { f.push_back(2); n /= 2; }
  for (int64_t p = 3; p * p <= n; p += 2)
    while (n % p == 0) { f.push_back((int)p); n /= p; }
  if (n > 1) f.push_back((int)std::min<int64_t>(n, INT32_MAX));
  return f;
}

// Rough complex operations per point of a stage: what the choice between the generic butterflies and Bluestein
// compares (the measured crossover sits near p = 60 on Sapphire Rapids).
double stage_cost(int p) { return p == 2 ? 1.0 : p == 3 ? 1.4 : p == 4 ? 1.2 : p == 5 ? 1.9 : 0.6 * p; }
double stockham_cost(int64_t n, const std::vector<int>& factors) {
  double c = 0;
  for (int p : factors) c += stage_cost(p);
  return c * (double)n;
}

int64_t smooth_size_at_least(int64_t n) {  // the smallest 2^a 3^b 5^c >= n
  int64_t best = INT64_MAX;
  for (int64_t p5 = 1; p5 < best; p5 *= 5)
    for (int64_t p35 = p5; p35 < best; p35 *= 3) {
      int64_t m = p35;
      while (m < n) m *= 2;
      best = std::min(best, m);
    }
  return best;
}

template <typename T>
struct Plan {
  struct Stage {
    int p;
    int64_t L, Rp;                 // L: product of the earlier radices; Rp = n / (L p)
    std::vector<Cx<T>> twiddles;   // [(q - 1) L + k1] = w_{Lp}^{q k1}
    std::vector<Cx<T>> roots;      // generic radix: w_p^j
  };
  int64_t n = 1;
  std::vector<Stage> stages;
  // Bluestein
  bool bluestein = false;
  int64_t m = 0;
  std::vector<Cx<T>> chirp;        // exp(-i pi j^2 / n), j < n
  std::vector<Cx<T>> kernel;       // the m-point transform of conj(chirp) around 0, divided by m
  std::shared_ptr<const Plan<T>> sub;

  // scratch for `batch` transforms at once (Bluestein plans take one)
  int64_t scratch_size(int64_t batch = 1) const { return bluestein ? 2 * m + sub->scratch_size() : n * batch; }
  // in, out and scratch distinct; batch > 1 (Stockham plans only): `batch` transforms interleaved, element j of
  // transform b at j batch + b
  template <bool Inv>
  void execute(const Cx<T>* in, Cx<T>* out, Cx<T>* scratch, int64_t batch = 1) const;
};

template <typename T>
std::shared_ptr<const Plan<T>> get_plan(int64_t n);

template <typename T>
std::shared_ptr<Plan<T>> make_stockham(int64_t n, const std::vector<int>& factors) {
  auto plan = std::make_shared<Plan<T>>();
  plan->n = n;
  int64_t L = 1;
  for (int p : factors) {
    typename Plan<T>::Stage s;
    s.p = p;
    s.L = L;
    s.Rp = n / (L * p);
    const int64_t Lp = L * p;
    s.twiddles.resize((size_t)(L * (p - 1)));
    for (int64_t k1 = 0; k1 < L; ++k1)
      for (int q = 1; q < p; ++q) {
        Cx<double> w = root((q * k1) % Lp, Lp);
        s.twiddles[(size_t)((q - 1) * L + k1)] = {(T)w.re, (T)w.im};
      }
    if (p > 5) {
      s.roots.resize((size_t)p);
      for (int j = 0; j < p; ++j) {
        Cx<double> w = root(j, p);
        s.roots[(size_t)j] = {(T)w.re, (T)w.im};
      }
    }
    plan->stages.push_back(std::move(s));
    L = Lp;
  }
  return plan;
}

template <typename T>
std::shared_ptr<Plan<T>> make_plan(int64_t n) {
  std::vector<int> factors = n > 1 ? factorize(n) : std::vector<int>{};
  int largest = factors.empty() ? 1 : factors.back();
  if (largest <= 5) return make_stockham<T>(n, factors);
  const int64_t m = smooth_size_at_least(2 * n - 1);
  const double bluestein_cost = 2 * stockham_cost(m, factorize(m)) + 3.0 * (double)m;
  if (largest <= kMaxGenericRadix && stockham_cost(n, factors) <= bluestein_cost) return make_stockham<T>(n, factors);

  auto plan = std::make_shared<Plan<T>>();
  plan->n = n;
  plan->bluestein = true;
  plan->m = m;
  plan->sub = get_plan<T>(m);
  std::vector<Cx<double>> chirp((size_t)n);
  for (int64_t j = 0; j < n; ++j) {
    // j^2 mod 2n exactly (unsigned __int128: j^2 overflows int64 from j = 3e9)
    int64_t j2 = (int64_t)(((unsigned __int128)j * (unsigned __int128)j) % (unsigned __int128)(2 * n));
    Cx<double> w = root(j2, 2 * n);
    chirp[(size_t)j] = w;
  }
  plan->chirp.resize((size_t)n);
  for (int64_t j = 0; j < n; ++j) plan->chirp[(size_t)j] = {(T)chirp[(size_t)j].re, (T)chirp[(size_t)j].im};
  // the kernel's transform in double, whatever T is: it enters every result
  auto sub64 = get_plan<double>(m);
  auto b = uninitialised<double>(m), bf = uninitialised<double>(m), scratch = uninitialised<double>(sub64->scratch_size());
  for (int64_t k = 0; k < m; ++k) b[k] = {0.0, 0.0};
  b[0] = conj(chirp[0]);
  for (int64_t j = 1; j < n; ++j) b[j] = b[m - j] = conj(chirp[(size_t)j]);
  sub64->template execute<false>(b.get(), bf.get(), scratch.get());
  plan->kernel.resize((size_t)m);
  for (int64_t k = 0; k < m; ++k)
    plan->kernel[(size_t)k] = {(T)(bf[k].re / (double)m), (T)(bf[k].im / (double)m)};
  return plan;
}

// ---- the butterflies: b_k = sum_q a_q w_p^{qk}, with w_p = exp(-+2 pi i / p) ----

template <bool Inv, typename T>
inline void butterfly(int p, Cx<T>* a, const Cx<T>* roots, Cx<T>* tmp) {
  switch (p) {
    case 2: {
      Cx<T> a0 = a[0], a1 = a[1];
      a[0] = a0 + a1;
      a[1] = a0 - a1;
      return;
    }
    case 4: {
      Cx<T> t0 = a[0] + a[2], t1 = a[0] - a[2], t2 = a[1] + a[3], t3 = rot<Inv>(a[1] - a[3]);
      a[0] = t0 + t2;
      a[2] = t0 - t2;
      a[1] = t1 + t3;
      a[3] = t1 - t3;
      return;
    }
    case 3: {
      const T h = (T)0.86602540378443864676372317075294;  // sin(2 pi / 3)
      Cx<T> t1 = a[1] + a[2], t2 = rot<Inv>(a[1] - a[2]) * h;
      Cx<T> mid = a[0] - t1 * (T)0.5;
      a[0] = a[0] + t1;
      a[1] = mid + t2;
      a[2] = mid - t2;
      return;
    }
    case 5: {
      const T c1 = (T)0.30901699437494742410229341718282, c2 = (T)-0.80901699437494742410229341718282;
      const T s1 = (T)0.95105651629515357211643933337938, s2 = (T)0.58778525229247312916870595463907;
      Cx<T> t1 = a[1] + a[4], t2 = a[2] + a[3], t3 = a[1] - a[4], t4 = a[2] - a[3];
      Cx<T> m1 = a[0] + t1 * c1 + t2 * c2, m2 = a[0] + t1 * c2 + t2 * c1;
      Cx<T> r1 = rot<Inv>(t3 * s1 + t4 * s2), r2 = rot<Inv>(t3 * s2 - t4 * s1);
      a[0] = a[0] + t1 + t2;
      a[1] = m1 + r1;
      a[4] = m1 - r1;
      a[2] = m2 + r2;
      a[3] = m2 - r2;
      return;
    }
    default: {
      for (int k = 0; k < p; ++k) {
        Cx<T> s = a[0];
        int qk = 0;
        for (int q = 1; q < p; ++q) {
          qk += k;
          if (qk >= p) qk -= p;
          s = s + mul<Inv>(a[q], roots[qk]);
        }
        tmp[k] = s;
      }
      for (int k = 0; k < p; ++k) a[k] = tmp[k];
    }
  }
}

// The stage loops read and write through T pointers (ld/st), not through Cx<T> lvalues: GCC vectorises the inner
// loop over r' only then (with Cx<T> loads it reported "no vectype" and ran scalar, 2x slower at 1024 points).
// below this many points per run over r', a stage's inner loop goes over k1 (run_stage_fixed)
constexpr int64_t kShortRun = 8;

template <typename T>
inline Cx<T> ld(const T* p) { return {p[0], p[1]}; }
template <typename T>
inline void st(T* p, Cx<T> v) { p[0] = v.re; p[1] = v.im; }

// One radix-P stage over `batch` interleaved transforms (Note [FFT plans]: element j of transform b at j batch + b,
// so that a batch runs as one transform whose R' is batch times longer and the inner loop stays long).
template <bool Inv, int P, typename T>
void run_stage_fixed(const typename Plan<T>::Stage& s, const T* __restrict in, T* __restrict out, int64_t batch) {
  const int64_t L = s.L, Rp = s.Rp * batch;
  const int64_t in_step = 2 * Rp, out_step = 2 * Rp * L;
  const T* tw = reinterpret_cast<const T*>(s.twiddles.data());
  if (Rp < kShortRun) {
    // the last stages of a line: runs over r' too short to vectorise, so the inner loop goes over k1 instead
    // (strided loads, contiguous stores for R' = 1)
    for (int64_t r = 0; r < Rp; ++r) {
      for (int64_t k1 = 0; k1 < L; ++k1) {
        const T* src = in + 2 * (r + Rp * P * k1);
        Cx<T> a[P];
        a[0] = ld(src);
        for (int q = 1; q < P; ++q) a[q] = mul<Inv>(ld(src + q * in_step), ld(tw + 2 * ((q - 1) * L + k1)));
        butterfly<Inv>(P, a, (const Cx<T>*)nullptr, (Cx<T>*)nullptr);
        T* dst = out + 2 * (r + Rp * k1);
        for (int q = 0; q < P; ++q) st(dst + q * out_step, a[q]);
      }
    }
    return;
  }
  for (int64_t k1 = 0; k1 < L; ++k1) {
    const T* src = in + 2 * Rp * P * k1;
    T* dst = out + 2 * Rp * k1;
    if (k1 == 0) {  // every twiddle is 1
      for (int64_t r = 0; r < Rp; ++r) {
        Cx<T> a[P];
        for (int q = 0; q < P; ++q) a[q] = ld(src + 2 * r + q * in_step);
        butterfly<Inv>(P, a, (const Cx<T>*)nullptr, (Cx<T>*)nullptr);
        for (int q = 0; q < P; ++q) st(dst + 2 * r + q * out_step, a[q]);
      }
      continue;
    }
    Cx<T> wq[P];
    for (int q = 1; q < P; ++q) wq[q] = ld(tw + 2 * ((q - 1) * L + k1));
    for (int64_t r = 0; r < Rp; ++r) {
      Cx<T> a[P];
      a[0] = ld(src + 2 * r);
      for (int q = 1; q < P; ++q) a[q] = mul<Inv>(ld(src + 2 * r + q * in_step), wq[q]);
      butterfly<Inv>(P, a, (const Cx<T>*)nullptr, (Cx<T>*)nullptr);
      for (int q = 0; q < P; ++q) st(dst + 2 * r + q * out_step, a[q]);
    }
  }
}

template <bool Inv, typename T>
void run_stage_generic(const typename Plan<T>::Stage& s, const T* __restrict in, T* __restrict out, int64_t batch) {
  const int p = s.p;
  const int64_t L = s.L, Rp = s.Rp * batch;
  const int64_t in_step = 2 * Rp, out_step = 2 * Rp * L;
  Cx<T> a[kMaxGenericRadix], tmp[kMaxGenericRadix];
  for (int64_t k1 = 0; k1 < L; ++k1) {
    const T* src = in + 2 * Rp * p * k1;
    T* dst = out + 2 * Rp * k1;
    for (int64_t r = 0; r < Rp; ++r) {
      a[0] = ld(src + 2 * r);
      for (int q = 1; q < p; ++q) a[q] = mul<Inv>(ld(src + 2 * r + q * in_step), s.twiddles[(size_t)((q - 1) * L + k1)]);
      butterfly<Inv>(p, a, s.roots.data(), tmp);
      for (int q = 0; q < p; ++q) st(dst + 2 * r + q * out_step, a[q]);
    }
  }
}

template <typename T>
template <bool Inv>
void Plan<T>::execute(const Cx<T>* in, Cx<T>* out, Cx<T>* scratch, int64_t batch) const {
  if (bluestein) {
    DG_CHECK(batch == 1, RuntimeError, "fft: internal error: a Bluestein plan transforms one line at a time.");
    Cx<T>* a = scratch;
    Cx<T>* A = scratch + m;
    Cx<T>* sub_scratch = scratch + 2 * m;
    // the inverse is the conjugate of the forward transform of the conjugate
    for (int64_t j = 0; j < n; ++j) a[j] = mul<false>(Inv ? conj(in[j]) : in[j], chirp[(size_t)j]);
    for (int64_t j = n; j < m; ++j) a[j] = {0, 0};
    sub->template execute<false>(a, A, sub_scratch);
    for (int64_t k = 0; k < m; ++k) A[k] = mul<false>(A[k], kernel[(size_t)k]);
    sub->template execute<true>(A, a, sub_scratch);
    for (int64_t j = 0; j < n; ++j) {
      Cx<T> r = mul<false>(a[j], chirp[(size_t)j]);
      out[j] = Inv ? conj(r) : r;
    }
    return;
  }
  const size_t ns = stages.size();
  if (ns == 0) {
    std::memcpy(out, in, sizeof(Cx<T>) * (size_t)(n * batch));
    return;
  }
  const T* src = reinterpret_cast<const T*>(in);
  for (size_t i = 0; i < ns; ++i) {
    T* dst = reinterpret_cast<T*>(((ns - 1 - i) % 2 == 0) ? out : scratch);  // the last stage writes out
    const Stage& s = stages[i];
    switch (s.p) {
      case 2: run_stage_fixed<Inv, 2, T>(s, src, dst, batch); break;
      case 3: run_stage_fixed<Inv, 3, T>(s, src, dst, batch); break;
      case 4: run_stage_fixed<Inv, 4, T>(s, src, dst, batch); break;
      case 5: run_stage_fixed<Inv, 5, T>(s, src, dst, batch); break;
      default: run_stage_generic<Inv, T>(s, src, dst, batch);
    }
    src = dst;
  }
}

// ---- the plan cache ----

template <typename T>
struct PlanCache {
  std::mutex mutex;
  std::map<int64_t, std::shared_ptr<const Plan<T>>> plans;
};
template <typename T>
PlanCache<T>& plan_cache() {
  static PlanCache<T>* cache = new PlanCache<T>();  // never destroyed: kernels may run during interpreter exit
  return *cache;
}

template <typename T>
std::shared_ptr<const Plan<T>> get_plan(int64_t n) {
  PlanCache<T>& cache = plan_cache<T>();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.plans.find(n);
    if (it != cache.plans.end()) return it->second;
  }
  std::shared_ptr<const Plan<T>> plan = make_plan<T>(n);  // outside the lock: Bluestein asks for its sub-plan
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.plans.size() >= kMaxCachedPlans) cache.plans.clear();
  return cache.plans.emplace(n, plan).first->second;
}

// ---- the real transforms of one line ----

// w_n^k for k <= n/2, for the untangling of even n
template <typename T>
struct RealTwiddles {
  std::vector<Cx<T>> w;
};
template <typename T>
std::shared_ptr<const RealTwiddles<T>> real_twiddles(int64_t n) {
  static std::mutex mutex;
  static auto* cache = new std::map<int64_t, std::shared_ptr<const RealTwiddles<T>>>();
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache->find(n);
    if (it != cache->end()) return it->second;
  }
  auto t = std::make_shared<RealTwiddles<T>>();
  t->w.resize((size_t)(n / 2 + 1));
  for (int64_t k = 0; k <= n / 2; ++k) {
    Cx<double> w = root(k, n);
    t->w[(size_t)k] = {(T)w.re, (T)w.im};
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (cache->size() >= kMaxCachedPlans) cache->clear();
  return cache->emplace(n, std::shared_ptr<const RealTwiddles<T>>(t)).first->second;
}

// What one thread needs to transform lines of n points: the plan, and buffers reused across lines.
template <typename T>
struct RealLine {
  int64_t n;
  bool even;
  std::shared_ptr<const Plan<T>> plan;  // of n/2 points when even, else of n
  std::shared_ptr<const RealTwiddles<T>> tw;
  std::unique_ptr<Cx<T>[]> a, b, scratch;
  explicit RealLine(int64_t n_) : n(n_), even(n_ % 2 == 0) {
    const int64_t c = even ? n / 2 : n;
    plan = get_plan<T>(c);
    if (even) tw = real_twiddles<T>(n);
    a = uninitialised<T>(c + 1);
    b = uninitialised<T>(c + 1);
    scratch = uninitialised<T>(plan->scratch_size());
  }

  // x: n reals; X: n/2 + 1 complex terms of the forward transform
  void r2c(const T* x, Cx<T>* X) {
    if (!even) {
      for (int64_t j = 0; j < n; ++j) a[j] = {x[j], (T)0};
      plan->template execute<false>(a.get(), b.get(), scratch.get());
      std::memcpy(X, b.get(), sizeof(Cx<T>) * (size_t)(n / 2 + 1));
      return;
    }
    const int64_t h = n / 2;
    std::memcpy(a.get(), x, sizeof(T) * (size_t)n);   // z[m] = x[2m] + i x[2m+1]
    plan->template execute<false>(a.get(), b.get(), scratch.get());
    const Cx<T>* Z = b.get();
    const Cx<T>* w = tw->w.data();
    X[0] = {Z[0].re + Z[0].im, (T)0};
    X[h] = {Z[0].re - Z[0].im, (T)0};
    for (int64_t k = 1; k < h; ++k) {
      Cx<T> A = Z[k], B = conj(Z[h - k]);
      Cx<T> E = (A + B) * (T)0.5;
      Cx<T> O = rot<false>(A - B) * (T)0.5;   // (A - B) / (2i)
      X[k] = E + mul<false>(O, w[k]);
    }
  }

  // X: n/2 + 1 complex terms; x: the n reals of the unnormalised inverse transform
  void c2r(const Cx<T>* X, T* x) {
    const int64_t h = n / 2;
    if (!even) {
      a[0] = {X[0].re, (T)0};
      for (int64_t k = 1; k <= h; ++k) {
        a[k] = X[k];
        a[n - k] = conj(X[k]);
      }
      plan->template execute<true>(a.get(), b.get(), scratch.get());
      for (int64_t j = 0; j < n; ++j) x[j] = b[j].re;
      return;
    }
    const Cx<T>* w = tw->w.data();
    Cx<T> X0 = {X[0].re, (T)0}, Xh = {X[h].re, (T)0};
    for (int64_t k = 0; k < h; ++k) {
      Cx<T> A = k == 0 ? X0 : X[k];
      Cx<T> B = conj(k == 0 ? Xh : X[h - k]);
      Cx<T> E = A + B;
      Cx<T> O = mul<true>(A - B, w[k]);                // (A - B) exp(+2 pi i k / n)
      a[k] = E + rot<true>(O);                         // E + i O
    }
    plan->template execute<true>(a.get(), b.get(), scratch.get());
    std::memcpy(x, b.get(), sizeof(T) * (size_t)n);   // z[m] = x[2m] + i x[2m+1]
  }
};

// ---- the drivers over a contiguous array ----

// Lines of a complex array seen as outer x n x inner transformed in place. Several neighbouring lines (along
// inner) are gathered at once, so that a transform along a leading dim reads whole cache lines.
constexpr int64_t kLinesPerBlock = 16;

// Runs worker(t) for t < tasks, split across threads when the whole (about work_per_task points each) is worth the
// pool; make_worker() is called once per chunk of tasks, so its buffers serve every task of the chunk.
template <typename MakeWorker>
void for_tasks(int64_t tasks, int64_t work_per_task, MakeWorker&& make_worker) {
  if (tasks <= 0) return;
  const int64_t grain = std::max<int64_t>(2, parallel_grain() / std::max<int64_t>(1, work_per_task));
  parallel_for(tasks, [&](int64_t lo, int64_t hi) {
    auto worker = make_worker();
    for (int64_t t = lo; t < hi; ++t) worker(t);
  }, grain);
}

// The lines of an array seen as outer x n x inner, in blocks of up to kLinesPerBlock neighbours along inner (so that
// a transform along a leading dim reads whole cache lines): worker(o, i0, b) gets the b lines from inner index i0 of
// outer index o.
template <typename MakeWorker>
void for_line_blocks(int64_t outer, int64_t n, int64_t inner, MakeWorker&& make_worker) {
  const int64_t block = std::min(inner, kLinesPerBlock);
  const int64_t blocks_per_outer = (inner + block - 1) / block;
  for_tasks(outer * blocks_per_outer, n * block, [&] {
    return [&, worker = make_worker()](int64_t t) mutable {
      const int64_t o = t / blocks_per_outer, i0 = (t % blocks_per_outer) * block;
      worker(o, i0, std::min(block, inner - i0));
    };
  });
}

// How many lines a Stockham plan transforms at once (Plan::execute's batch): enough that the inner loops stay
// long in the last stages, few enough that the three buffers stay in L2 (kBatchPoints complex numbers each).
constexpr int64_t kBatchPoints = 16384;

template <bool Inv, typename T>
void c2c_along(Cx<T>* data, int64_t outer, int64_t n, int64_t inner) {
  if (n == 1) return;
  auto plan = get_plan<T>(n);
  if (plan->bluestein) {  // one line at a time
    const int64_t block = std::min(inner, kLinesPerBlock);
    for_line_blocks(outer, n, inner, [&] {
      auto in = uninitialised<T>(inner == 1 ? 1 : n * block), out = uninitialised<T>(n * block),
           scratch = uninitialised<T>(plan->scratch_size());
      return [&, in = std::move(in), out = std::move(out), scratch = std::move(scratch)](int64_t o, int64_t i0,
                                                                                          int64_t b) {
        Cx<T>* base = data + o * n * inner + i0;
        if (inner == 1) {
          plan->template execute<Inv>(base, out.get(), scratch.get());
          std::memcpy(base, out.get(), sizeof(Cx<T>) * (size_t)n);
          return;
        }
        for (int64_t j = 0; j < n; ++j)
          for (int64_t l = 0; l < b; ++l) in[l * n + j] = base[j * inner + l];
        for (int64_t l = 0; l < b; ++l) plan->template execute<Inv>(&in[l * n], &out[l * n], scratch.get());
        for (int64_t j = 0; j < n; ++j)
          for (int64_t l = 0; l < b; ++l) base[j * inner + l] = out[l * n + j];
      };
    });
    return;
  }
  // Stockham: lines along a leading dim up to `batch` at once, interleaved (element j of line l at j b + l)
  const int64_t batch = inner == 1 ? 1 : std::max<int64_t>(1, std::min<int64_t>(kLinesPerBlock, kBatchPoints / n));
  auto buffers = [&] {
    struct B {
      std::unique_ptr<Cx<T>[]> in, out, scratch;
    };
    return B{uninitialised<T>(n * batch), uninitialised<T>(n * batch), uninitialised<T>(plan->scratch_size(batch))};
  };
  if (inner == 1) {
    // contiguous lines one at a time: gathering several transposed cost more than the longer loops saved (1024
    // rows of 1024 points: 7.2 ms with 16 at a time, 4.7 ms one by one; CPU time, Sapphire Rapids)
    for_tasks(outer, n, [&] {
      return [&, buf = buffers()](int64_t o) {
        Cx<T>* base = data + o * n;
        plan->template execute<Inv>(base, buf.out.get(), buf.scratch.get());
        std::memcpy(base, buf.out.get(), sizeof(Cx<T>) * (size_t)n);
      };
    });
    return;
  }
  const int64_t blocks_per_outer = (inner + batch - 1) / batch;
  for_tasks(outer * blocks_per_outer, n * batch, [&] {
    return [&, buf = buffers()](int64_t t) {
      const int64_t o = t / blocks_per_outer, i0 = (t % blocks_per_outer) * batch;
      const int64_t b = std::min(batch, inner - i0);
      Cx<T>* base = data + o * n * inner + i0;
      for (int64_t j = 0; j < n; ++j) std::memcpy(&buf.in[j * b], base + j * inner, sizeof(Cx<T>) * (size_t)b);
      plan->template execute<Inv>(buf.in.get(), buf.out.get(), buf.scratch.get(), b);
      for (int64_t j = 0; j < n; ++j) std::memcpy(base + j * inner, &buf.out[j * b], sizeof(Cx<T>) * (size_t)b);
    };
  });
}

template <typename T>
void scale_by(T* p, int64_t count, double scale) {
  if (scale == 1.0) return;
  const T s = (T)scale;
  parallel_for(count, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) p[i] *= s;
  });
}

double norm_scale(FftNorm norm, double points, bool forward) {
  switch (norm) {
    case FftNorm::Ortho: return 1.0 / std::sqrt(points);
    case FftNorm::Backward: return forward ? 1.0 : 1.0 / points;
    case FftNorm::Forward: return forward ? 1.0 / points : 1.0;
  }
  return 1.0;
}

// ---- argument checks ----

bool is_float_type(DType d) { return d == DType::Float32 || d == DType::Float64; }

std::vector<int64_t> wrap_fft_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  DG_CHECK(!dims.empty(), ValueError, op, ": dims must name at least one dim.");
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    for (int64_t e : out) DG_CHECK(e != w, ValueError, op, ": dims must be distinct; dim ", w, " appears twice.");
    out.push_back(w);
  }
  return out;
}

void check_complex_layout(const Tensor& x, const char* op) {
  DG_CHECK(is_float_type(x->dtype), TypeError, op, ": x must be float32 or float64 (a complex tensor as its real "
           "view), got ", dtype_name(x->dtype), ".");
  DG_CHECK(x->ndim() >= 1 && x->shape.back() == 2, ValueError, op, ": x must have a trailing dim of size 2 (the "
           "real and imaginary parts), got shape ", shape_str(std::vector<int64_t>(x->shape.begin(), x->shape.end())),
           ".");
}

void check_points(const Shape& shape, const std::vector<int64_t>& dims, const char* op) {
  for (int64_t d : dims)
    DG_CHECK(shape[d] >= 1, ValueError, op, ": invalid number of data points (", shape[d], ") along dim ", d,
             "; a transform needs at least 1.");
}

struct Around {
  int64_t outer, n, inner;
};
Around around(const Shape& shape, int64_t d) {
  AroundDim a = around_dim(shape, d);
  return {a.outer, a.n, a.inner};
}

template <typename T>
void c2c_dims(T* data, const Shape& cshape, const std::vector<int64_t>& dims, bool forward) {
  for (int64_t d : dims) {
    Around a = around(cshape, d);
    if (forward)
      c2c_along<false>(reinterpret_cast<Cx<T>*>(data), a.outer, a.n, a.inner);
    else
      c2c_along<true>(reinterpret_cast<Cx<T>*>(data), a.outer, a.n, a.inner);
  }
}

template <typename T>
Tensor c2c_typed(const Tensor& x, const std::vector<int64_t>& dims, bool forward, FftNorm norm) {
  Shape cshape(x->shape.begin(), x->shape.end() - 1);
  Tensor out = contiguous_copy(x, x->dtype);
  c2c_dims(out->data<T>(), cshape, dims, forward);
  double points = 1;
  for (int64_t d : dims) points *= (double)cshape[d];
  scale_by(out->data<T>(), shape_numel(out->shape), norm_scale(norm, points, forward));
  return out;
}

template <typename T>
Tensor r2c_typed(const Tensor& x, const std::vector<int64_t>& dims, bool forward, FftNorm norm, bool onesided) {
  double points = 1;
  for (int64_t d : dims) points *= (double)x->shape[d];
  const double scale = norm_scale(norm, points, forward);
  Shape cshape = x->shape;
  Shape out_shape = x->shape;
  out_shape.push_back(2);
  if (!onesided) {
    // the whole spectrum: the real signal as complex numbers, through the complex transform
    Tensor out = zeros(out_shape, x->dtype);
    Tensor src = contiguous_data(x);
    const T* s = src->template data<T>();
    Cx<T>* o = reinterpret_cast<Cx<T>*>(out->template data<T>());
    const int64_t count = shape_numel(x->shape);
    for (int64_t i = 0; i < count; ++i) o[i].re = s[i];
    c2c_dims(out->template data<T>(), cshape, dims, true);
    scale_by(out->template data<T>(), shape_numel(out_shape), scale);
    if (!forward) {
      for (int64_t i = 0; i < count; ++i) o[i].im = -o[i].im;
    }
    return out;
  }
  const int64_t last = dims.back();
  const int64_t n = x->shape[last], half = n / 2 + 1;
  cshape[last] = half;
  out_shape[last] = half;
  Tensor out = empty(out_shape, x->dtype);
  Tensor src = contiguous_data(x);
  const T* s = src->template data<T>();
  Cx<T>* o = reinterpret_cast<Cx<T>*>(out->template data<T>());
  Around a = around(x->shape, last);
  for_line_blocks(a.outer, n, a.inner, [&] {
    return [&, line = std::make_unique<RealLine<T>>(n), xs = std::vector<T>(a.inner == 1 ? 0 : n),
            Xs = std::vector<Cx<T>>(a.inner == 1 ? 0 : half)](int64_t outer, int64_t i0, int64_t b) mutable {
      for (int64_t l = 0; l < b; ++l) {
        const T* src_line = s + outer * n * a.inner + i0 + l;
        Cx<T>* dst = o + outer * half * a.inner + i0 + l;
        if (a.inner == 1) {
          line->r2c(src_line, dst);
          continue;
        }
        for (int64_t j = 0; j < n; ++j) xs[(size_t)j] = src_line[j * a.inner];
        line->r2c(xs.data(), Xs.data());
        for (int64_t k = 0; k < half; ++k) dst[k * a.inner] = Xs[(size_t)k];
      }
    };
  });
  std::vector<int64_t> rest(dims.begin(), dims.end() - 1);
  c2c_dims(out->template data<T>(), cshape, rest, true);
  scale_by(out->template data<T>(), shape_numel(out_shape), scale);
  if (!forward) {
    const int64_t count = shape_numel(cshape);
    for (int64_t i = 0; i < count; ++i) o[i].im = -o[i].im;
  }
  return out;
}

template <typename T>
Tensor c2r_typed(const Tensor& x, const std::vector<int64_t>& dims, bool forward, FftNorm norm, int64_t n) {
  Shape cshape(x->shape.begin(), x->shape.end() - 1);
  const int64_t last = dims.back(), half = n / 2 + 1;
  Tensor work = contiguous_copy(x, x->dtype);
  Cx<T>* w = reinterpret_cast<Cx<T>*>(work->template data<T>());
  const int64_t count = shape_numel(cshape);
  // the forward transform of a Hermitian signal is the inverse transform of its conjugate
  if (forward)
    for (int64_t i = 0; i < count; ++i) w[i].im = -w[i].im;
  std::vector<int64_t> rest(dims.begin(), dims.end() - 1);
  c2c_dims(work->template data<T>(), cshape, rest, false);
  Shape out_shape = cshape;
  out_shape[last] = n;
  Tensor out = empty(out_shape, x->dtype);
  T* o = out->template data<T>();
  Around a = around(cshape, last);
  for_line_blocks(a.outer, n, a.inner, [&] {
    return [&, line = std::make_unique<RealLine<T>>(n), xs = std::vector<T>(a.inner == 1 ? 0 : n),
            Xs = std::vector<Cx<T>>(a.inner == 1 ? 0 : half)](int64_t outer, int64_t i0, int64_t b) mutable {
      for (int64_t l = 0; l < b; ++l) {
        const Cx<T>* src_line = w + outer * half * a.inner + i0 + l;
        T* dst = o + outer * n * a.inner + i0 + l;
        if (a.inner == 1) {
          line->c2r(src_line, dst);
          continue;
        }
        for (int64_t k = 0; k < half; ++k) Xs[(size_t)k] = src_line[k * a.inner];
        line->c2r(Xs.data(), xs.data());
        for (int64_t j = 0; j < n; ++j) dst[j * a.inner] = xs[(size_t)j];
      }
    };
  });
  double points = 1;
  for (int64_t d : dims) points *= (double)out_shape[d];
  scale_by(o, shape_numel(out_shape), norm_scale(norm, points, forward));
  return out;
}

}  // namespace

FftNorm parse_fft_norm(const std::string& norm, const char* op) {
  if (norm == "backward") return FftNorm::Backward;
  if (norm == "ortho") return FftNorm::Ortho;
  if (norm == "forward") return FftNorm::Forward;
  throw ValueError(str_cat(op, ": norm must be 'backward', 'ortho' or 'forward', got '", norm, "'."));
}

Tensor fft_c2c(const Tensor& x, const std::vector<int64_t>& dims, bool forward, FftNorm norm) {
  const char* op = "_fft_c2c";
  check_complex_layout(x, op);
  Shape cshape(x->shape.begin(), x->shape.end() - 1);
  std::vector<int64_t> d = wrap_fft_dims(dims, (int64_t)cshape.size(), op);
  check_points(cshape, d, op);
  return x->dtype == DType::Float32 ? c2c_typed<float>(x, d, forward, norm) : c2c_typed<double>(x, d, forward, norm);
}

Tensor fft_r2c(const Tensor& x, const std::vector<int64_t>& dims, bool forward, FftNorm norm, bool onesided) {
  const char* op = "_fft_r2c";
  DG_CHECK(is_float_type(x->dtype), TypeError, op, ": x must be float32 or float64, got ", dtype_name(x->dtype), ".");
  std::vector<int64_t> d = wrap_fft_dims(dims, x->ndim(), op);
  check_points(x->shape, d, op);
  return x->dtype == DType::Float32 ? r2c_typed<float>(x, d, forward, norm, onesided)
                                    : r2c_typed<double>(x, d, forward, norm, onesided);
}

Tensor fft_c2r(const Tensor& x, const std::vector<int64_t>& dims, bool forward, FftNorm norm, int64_t last_dim_size) {
  const char* op = "_fft_c2r";
  check_complex_layout(x, op);
  Shape cshape(x->shape.begin(), x->shape.end() - 1);
  std::vector<int64_t> d = wrap_fft_dims(dims, (int64_t)cshape.size(), op);
  DG_CHECK(last_dim_size >= 1, ValueError, op, ": invalid number of data points (", last_dim_size,
           "); last_dim_size must be at least 1.");
  DG_CHECK(cshape[d.back()] == last_dim_size / 2 + 1, ValueError, op, ": x has ", cshape[d.back()],
           " terms along dim ", d.back(), ", but a real signal of ", last_dim_size, " points has ",
           last_dim_size / 2 + 1, " (last_dim_size // 2 + 1).");
  std::vector<int64_t> rest(d.begin(), d.end() - 1);
  check_points(cshape, rest, op);
  return x->dtype == DType::Float32 ? c2r_typed<float>(x, d, forward, norm, last_dim_size)
                                    : c2r_typed<double>(x, d, forward, norm, last_dim_size);
}

std::string fft_plan_description(int64_t n, bool double_precision) {
  DG_CHECK(n >= 1, ValueError, "_fft_plan: n must be at least 1, got ", n, ".");
  auto describe = [](auto plan) {
    std::string s;
    if (plan->bluestein) {
      s = str_cat("bluestein m=", plan->m, " over ");
      plan = plan->sub;
    }
    s += "stockham";
    for (size_t i = 0; i < plan->stages.size(); ++i) s += str_cat(i ? "x" : " ", plan->stages[i].p);
    return s;
  };
  if (double_precision) {
    auto p = get_plan<double>(n);
    return describe(p);
  }
  auto p = get_plan<float>(n);
  return describe(p);
}

int64_t fft_cached_plan_count() {
  int64_t count = 0;
  {
    std::lock_guard<std::mutex> lock(plan_cache<float>().mutex);
    count += (int64_t)plan_cache<float>().plans.size();
  }
  std::lock_guard<std::mutex> lock(plan_cache<double>().mutex);
  return count + (int64_t)plan_cache<double>().plans.size();
}

void fft_clear_plan_cache() {
  {
    std::lock_guard<std::mutex> lock(plan_cache<float>().mutex);
    plan_cache<float>().plans.clear();
  }
  std::lock_guard<std::mutex> lock(plan_cache<double>().mutex);
  plan_cache<double>().plans.clear();
}

}  // namespace dyngrad
