// pool.cpp: size classes of 32 bytes up to 1 KiB, one free list per class per thread.
#include "pool.h"

#include <cstdlib>
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

namespace {
constexpr size_t kLargeBuffer = size_t(64) << 10;  // from here on, freed buffers are cached for reuse
constexpr size_t kHugeBuffer = size_t(1) << 20;    // from here on, they are also huge-page backed
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kCacheLimit = size_t(1) << 30;  // at most 1 GiB of freed buffers kept for reuse

struct BufferCache {
  std::mutex mutex;
  std::multimap<size_t, void*> free_blocks;  // rounded size -> block
  size_t cached = 0;
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
  {
    BufferCache& cache = buffer_cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.free_blocks.find(size);
    if (it != cache.free_blocks.end()) {
      void* p = it->second;
      cache.free_blocks.erase(it);
      cache.cached -= size;
      return p;
    }
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
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (cache.cached + size <= kCacheLimit) {
      cache.free_blocks.emplace(size, p);
      cache.cached += size;
      return;
    }
  }
  std::free(p);
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
    for (auto& [size, p] : cache.free_blocks) std::free(p);
    cache.free_blocks.clear();
    cache.cached = 0;
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
