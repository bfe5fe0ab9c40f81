// pool.cpp: size classes of 32 bytes up to 1 KiB, one free list per class per thread.
#include "pool.h"

#include <cstdlib>

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

thread_local ThreadCache tl_cache;

inline size_t size_class(size_t bytes) { return (bytes + kGranule - 1) / kGranule - 1; }
}  // namespace

void* allocate(size_t bytes) {
  size_t c = size_class(bytes);
  if (c < kClasses && tl_cache.alive) {
    ThreadCache& cache = tl_cache;
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
  if (c < kClasses && tl_cache.alive) {
    ThreadCache& cache = tl_cache;
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

}  // namespace pool
}  // namespace dyngrad
