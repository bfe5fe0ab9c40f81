// pool.h: a per-thread free-list allocator for the objects every op creates and destroys (TensorImpl, Storage,
// OpNode, with their shared_ptr control blocks).
//
// Why: these are 200-400 bytes, too big for glibc's fast paths, and a backward pass frees thousands of them at
// once, so plain malloc/free spent more instructions than the rest of a small op together. Freed blocks go to a
// per-thread list by size class and are reused by the next op; each list is capped, beyond which blocks go back
// to malloc.
#pragma once
#include <cstddef>
#include <memory>
#include <new>

namespace dyngrad {
namespace pool {

void* allocate(size_t bytes);
void deallocate(void* p, size_t bytes) noexcept;

// Tensor data. Small buffers come from malloc. Buffers from 64 KiB up are kept, when freed, in a cache for the next
// op of the same size (a training step reallocates the same sizes every iteration, and a fresh buffer costs a page
// fault per 4 KiB), bounded by the peak working set (Note [Bounded buffer cache] in pool.cpp); from 1 MiB up they
// are also 2 MiB-aligned and marked for huge pages.
void* allocate_buffer(size_t bytes);
void free_buffer(void* p, size_t bytes) noexcept;
size_t cached_buffer_bytes();
// Frees every cached buffer and this thread's free lists, then trims the heap (dyngrad._C._empty_cache()).
void empty_buffer_cache();

}  // namespace pool

template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() noexcept = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(pool::allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { pool::deallocate(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const noexcept { return true; }
  template <typename U>
  bool operator!=(const PoolAllocator<U>&) const noexcept { return false; }
};

// std::make_shared, with the object and its control block from the pool.
template <typename T, typename... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
  return std::allocate_shared<T>(PoolAllocator<T>(), std::forward<Args>(args)...);
}

}  // namespace dyngrad
