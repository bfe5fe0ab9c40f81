// pool.cpp: size classes of 32 bytes up to 1 KiB, one free list per class per thread.
#include "pool.h"

#include <cstdlib>
#include <iterator>
#include <list>
#include <map>
#include <mutex>
#include <malloc.h>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace dyngrad {
namespace pool {

namespace {
constexpr size_t kGranule = 32;
constexpr size_t kClasses = 32;              // up to 1024 bytes
constexpr size_t kMaxCachedPerClass = 1 << 16;

struct FreeBlock {
  FreeBlock* next;
};

struct ThreadCache {
  FreeBlock* head[kClasses] = {};
  size_t count[kClasses] = {};
  bool alive = true;  // blocks freed during thread teardown, after this cache died, go straight to free()
  ~ThreadCache() {
    alive = false;
    for (size_t c = 0; c < kClasses; ++c)
      while (head[c]) {
        FreeBlock* b = head[c];
        head[c] = b->next;
        std::free(b);
      }
  }
};

// The cache itself is reached through an initial-exec TLS pointer (8 bytes of static TLS, one instruction per
// access); a general-dynamic thread_local owner frees it when the thread exits.
thread_local ThreadCache* tl_cache_ptr __attribute__((tls_model("initial-exec"))) = nullptr;
struct CacheOwner {
  ThreadCache cache;
  ~CacheOwner() { tl_cache_ptr = nullptr; }
};
ThreadCache* thread_cache() {
  if (__builtin_expect(tl_cache_ptr != nullptr, 1)) return tl_cache_ptr;
  static thread_local CacheOwner owner;
  if (!owner.cache.alive) return nullptr;
  tl_cache_ptr = &owner.cache;
  return tl_cache_ptr;
}

inline size_t size_class(size_t bytes) { return (bytes + kGranule - 1) / kGranule - 1; }
}  // namespace

void* allocate(size_t bytes) {
  size_t c = size_class(bytes);
  ThreadCache* tc = c < kClasses ? thread_cache() : nullptr;
  if (tc) {
    ThreadCache& cache = *tc;
    if (FreeBlock* b = cache.head[c]) {
      cache.head[c] = b->next;
      --cache.count[c];
      return b;
    }
    bytes = (c + 1) * kGranule;  // a whole class, so that the block can serve any request of its class later
  }
  void* p = std::malloc(bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

void deallocate(void* p, size_t bytes) noexcept {
  size_t c = size_class(bytes);
  ThreadCache* tc = c < kClasses ? thread_cache() : nullptr;
  if (tc) {
    ThreadCache& cache = *tc;
    if (cache.count[c] < kMaxCachedPerClass) {
      auto* b = static_cast<FreeBlock*>(p);
      b->next = cache.head[c];
      cache.head[c] = b;
      ++cache.count[c];
      return;
    }
  }
  std::free(p);
}

// Note [Bounded buffer cache]: a training step frees and reallocates the same buffer sizes every iteration, so
// freed large buffers are kept for the next allocation of their (rounded) size. The cache holds at most as many
// bytes as the program ever had live in large buffers at once (its peak working set, at most 1 GiB), evicting the
// least recently freed first: a periodic loop's reuse set is what it frees in one iteration, which was live at the
// same time and so fits, while sizes that are never asked for again (a generator whose sequence grows by one token
// per step asks for new sizes at every step) age out instead of piling up. Before, any freed buffer was kept until
// 1 GiB was cached, and a text generator settled at 1.2 GB against PyTorch's 0.5 GB (bench/generate_memory.py).
//
// Note [Cache capacity from re-asked sizes]: "what one iteration frees was live at once" does not hold when a
// step frees buffers early and later allocates others of other sizes: the sizes a step asks for can add up to more
// than its peak. The cache then evicted, at every step, the buffers the next step asked for first (least recently
// freed) and those came back as fresh memory: page faults and the kernel zeroing each page (clear_page_erms 5% of
// a LeNet step on 2 threads, 1-2 fresh 0.8 MiB buffers per LSTM step; Xeon family 6 model 167). So the sizes
// evicted recently are remembered (a few dozen, `ghosts`), and a miss on one of them raises the capacity by that
// size, up to twice the peak working set: a periodic loop grows the cache to its reuse set, while a generator,
// whose evicted sizes are never asked for again, keeps the bound above.
//
// Note [Hot buffers first]: of the cached blocks of a size, an allocation takes the one freed last (LIFO), whose
// lines are the likeliest to be still in the caches; the one freed first (what std::multimap::find returns) is the
// coldest, and taking it made a step cycle through every cached block of a size. Measured (bench/torch_pairs.py's
// "touched": pages one step references; Xeon family 6 model 167, KVM, 1 thread, load 5): the footprint hardly
// changed (cnn-train 28.9 -> 28.8 MiB, lstm-train 28.1 -> 25.5, gpt-train 55.2 -> 54.8), since a training step
// holds nearly all its buffers of a size live at once and so touches them all in either order; LIFO is kept
// because it is never worse and is the order glibc's bins (what PyTorch's CPU allocator uses) reuse in. The step's
// own CPU time, processes alternated three times (1 thread, same machine, load 6-9), FIFO -> LIFO: cnn-train
// 7.3-7.7 -> 6.2-7.2 ms, lstm-train 10.7-11.9 -> 10.2-11.1, transformer-train 17.5-17.7 -> 16.0-17.5, wide-mlp-train
// 43.0-44.0 -> 40.9-43.9, gpt-train 53.7-56.2 -> 51.9-53.6: never slower, 14 of the 15 pairs faster.
//
// Note [Huge pages and cache sets]: buffers from 1 MiB up start on a 2 MiB boundary, so every one starts at cache
// set 0; but each covers at least 1 MiB contiguously, which spans every set of a 2 MiB 16-way L2 (128 KiB a way) many
// times over, so no set gets more than its share. Tried without huge pages (every large buffer 64-byte aligned from
// aligned_alloc, 4 KiB pages; same machine, 1 thread, two alternated runs each): the steps got slower (gpt-train
// 51.8-52.1 -> 53.8-55.5 ms CPU, wide-mlp-train 42.4-42.6 -> 44.0-44.5, transformer-train 16.9-17.5 -> 17.4-18.1)
// and the pages a step references, now counted at 4 KiB, were still below torch's except in the CNN (cnn-train
// 24.2 MiB against torch's 19.5, from its im2col columns, kernels/conv.cpp: (25, 64, 784) and (150, 64, 100) floats,
// 8.6 MiB; lstm-train 23.0 against 26, transformer-train 26.2 against 47, wide-mlp-train 30.0 against 42, gpt-train
// 49.4 against 77-90), so the huge pages stay.
namespace {
constexpr size_t kLargeBuffer = size_t(64) << 10;  // from here on, freed buffers are cached for reuse
constexpr size_t kHugeBuffer = size_t(1) << 20;    // from here on, they are also huge-page backed
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kCacheLimit = size_t(1) << 30;  // the cache's ceiling, whatever the peak working set
constexpr size_t kGhosts = 64;                   // evicted sizes remembered (Note [Cache capacity from re-asked sizes])

struct CachedBlock {
  void* p;
  size_t size;
};
struct BufferCache {
  std::mutex mutex;
  std::list<CachedBlock> by_age;  // least recently freed first
  std::multimap<size_t, std::list<CachedBlock>::iterator> by_size;
  size_t cached = 0;
  size_t live = 0;       // bytes of large buffers handed out and not yet freed
  size_t peak_live = 0;  // the most that were live at once (since the last empty_buffer_cache)
  size_t bonus = 0;      // capacity beyond peak_live, from misses on evicted sizes (at most peak_live)
  std::list<size_t> ghosts;  // sizes evicted recently, oldest first

  void note_allocated(size_t size) {
    live += size;
    if (live > peak_live) peak_live = live;
  }
  size_t capacity() const { return peak_live + bonus < kCacheLimit ? peak_live + bonus : kCacheLimit; }
  void note_evicted(size_t size) {
    ghosts.push_back(size);
    if (ghosts.size() > kGhosts) ghosts.pop_front();
  }
  void note_missed(size_t size) {  // Note [Cache capacity from re-asked sizes]
    for (auto it = ghosts.begin(); it != ghosts.end(); ++it)
      if (*it == size) {
        ghosts.erase(it);
        bonus = bonus + size < peak_live ? bonus + size : peak_live;
        return;
      }
  }
  // the oldest block out of the cache (the caller frees it, outside the lock)
  CachedBlock pop_oldest() {
    CachedBlock b = by_age.front();
    auto range = by_size.equal_range(b.size);
    for (auto it = range.first; it != range.second; ++it)
      if (it->second == by_age.begin()) {
        by_size.erase(it);
        break;
      }
    by_age.pop_front();
    cached -= b.size;
    return b;
  }
};
BufferCache& buffer_cache() {
  static BufferCache* cache = new BufferCache();  // never destroyed: buffers may be freed during interpreter exit
  return *cache;
}
inline size_t round_large(size_t bytes) {
  size_t unit = bytes >= kHugeBuffer ? kHugePage : kLargeBuffer;
  return (bytes + unit - 1) / unit * unit;
}
}  // namespace

void* allocate_buffer(size_t bytes) {
  if (bytes < kLargeBuffer) {
    void* p = std::malloc(bytes <= 16 ? 16 : bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  size_t size = round_large(bytes);
  BufferCache& cache = buffer_cache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    // the most recently freed block of the size (Note [Hot buffers first]): a multimap keeps equal keys in
    // insertion order, so that is the last of the size's range
    auto it = cache.by_size.upper_bound(size);
    if (it != cache.by_size.begin() && (--it)->first == size) {
      void* p = it->second->p;
      cache.by_age.erase(it->second);
      cache.by_size.erase(it);
      cache.cached -= size;
      cache.note_allocated(size);
      return p;
    }
    cache.note_missed(size);
  }
  const size_t align = size >= kHugeBuffer ? kHugePage : 64;
  void* p = std::aligned_alloc(align, size);
  if (!p) {
    empty_buffer_cache();  // memory is short: give the cached buffers back and try once more
    p = std::aligned_alloc(align, size);
    if (!p) throw std::bad_alloc();
  }
#ifdef MADV_HUGEPAGE
  if (size >= kHugeBuffer) madvise(p, size, MADV_HUGEPAGE);
#endif
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.note_allocated(size);
  return p;
}

void free_buffer(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kLargeBuffer) {
    std::free(p);
    return;
  }
  size_t size = round_large(bytes);
  BufferCache& cache = buffer_cache();
  CachedBlock evicted[8];
  size_t n_evicted = 0;
  bool kept = false;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.live -= size < cache.live ? size : cache.live;
    if (size <= cache.capacity()) {
      try {
        cache.by_age.push_back({p, size});
        cache.by_size.emplace(size, std::prev(cache.by_age.end()));
        cache.cached += size;
        kept = true;
      } catch (...) {  // no memory for the bookkeeping: free the buffer instead
        if (cache.by_age.size() && cache.by_age.back().p == p) cache.by_age.pop_back();
      }
      // evict the oldest blocks beyond the capacity; more than a few at once are freed under the lock
      while (cache.cached > cache.capacity()) {
        CachedBlock b = cache.pop_oldest();
        cache.note_evicted(b.size);
        if (n_evicted < 8) evicted[n_evicted++] = b;
        else std::free(b.p);
      }
    }
  }
  for (size_t i = 0; i < n_evicted; ++i) std::free(evicted[i].p);
  if (!kept) std::free(p);
}

size_t cached_buffer_bytes() {
  BufferCache& cache = buffer_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.cached;
}

void empty_buffer_cache() {
  {
    BufferCache& cache = buffer_cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    for (const CachedBlock& b : cache.by_age) std::free(b.p);
    cache.by_age.clear();
    cache.by_size.clear();
    cache.cached = 0;
    cache.peak_live = cache.live;  // the working set is measured again from here
    cache.bonus = 0;
    cache.ghosts.clear();
  }
  if (ThreadCache* tc = thread_cache()) {  // this thread's free lists of small objects
    for (size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = tc->head[c]) {
        tc->head[c] = b->next;
        std::free(b);
      }
      tc->count[c] = 0;
    }
  }
#ifdef __GLIBC__
  malloc_trim(0);  // and hand the freed heap back to the system
#endif
}

}  // namespace pool
}  // namespace dyngrad
