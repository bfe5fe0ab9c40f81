// dim_vector.h: Shape and strides: a vector of int64 that keeps up to 6 dims inline (no heap allocation), which
// is every tensor in practice. Per-op overhead is dominated by allocations; two of them per tensor were this.
// Converts to and from std::vector<int64_t> so that it mixes with dims lists.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace dyngrad {

class DimVector {
 public:
  using value_type = int64_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  static constexpr size_t kInline = 6;

  DimVector() = default;
  explicit DimVector(size_t n, int64_t v = 0) { assign(n, v); }
  DimVector(std::initializer_list<int64_t> il) { assign_range(il.begin(), il.end()); }
  template <typename It, typename = decltype(*std::declval<It>())>
  DimVector(It first, It last) { assign_range(first, last); }
  DimVector(const std::vector<int64_t>& v) { assign_range(v.begin(), v.end()); }  // NOLINT: implicit by design
  DimVector(const DimVector& o) { assign_range(o.begin(), o.end()); }
  DimVector(DimVector&& o) noexcept { steal(o); }
  DimVector& operator=(const DimVector& o) {
    if (this != &o) assign_range(o.begin(), o.end());
    return *this;
  }
  DimVector& operator=(DimVector&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  ~DimVector() { release(); }
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  const int64_t& operator[](size_t i) const { return data()[i]; }
  int64_t& back() { return data()[size_ - 1]; }
  const int64_t& back() const { return data()[size_ - 1]; }
  int64_t& front() { return data()[0]; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }

  void reserve(size_t n) {
    if (n <= capacity()) return;
    int64_t* p = new int64_t[n];
    std::memcpy(p, data(), size_ * sizeof(int64_t));
    delete[] heap_;
    heap_ = p;
    cap_ = n;
  }
  void resize(size_t n, int64_t v = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = v;
    size_ = n;
  }
  void assign(size_t n, int64_t v) {
    size_ = 0;
    resize(n, v);
  }
  void clear() { size_ = 0; }
  void push_back(int64_t v) {
    if (size_ == capacity()) reserve(std::max<size_t>(2 * capacity(), kInline));
    data()[size_++] = v;
  }
  void pop_back() { --size_; }
  iterator insert(const_iterator pos, int64_t v) {
    size_t at = pos - begin();
    push_back(v);
    std::rotate(begin() + at, end() - 1, end());
    return begin() + at;
  }
  template <typename It>
  iterator insert(const_iterator pos, It first, It last) {
    size_t at = pos - begin(), old = size_;
    for (; first != last; ++first) push_back(*first);
    std::rotate(begin() + at, begin() + old, end());
    return begin() + at;
  }
  iterator erase(const_iterator pos) {
    size_t at = pos - begin();
    std::copy(begin() + at + 1, end(), begin() + at);
    --size_;
    return begin() + at;
  }

  friend bool operator==(const DimVector& a, const DimVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const DimVector& a, const DimVector& b) { return !(a == b); }

 private:
  size_t capacity() const { return heap_ ? cap_ : kInline; }
  template <typename It>
  void assign_range(It first, It last) {
    size_ = 0;
    reserve((size_t)std::distance(first, last));
    for (; first != last; ++first) data()[size_++] = *first;
  }
  void steal(DimVector& o) {
    size_ = o.size_;
    if (o.heap_) {
      heap_ = o.heap_;
      cap_ = o.cap_;
      o.heap_ = nullptr;
    } else {
      std::memcpy(inline_, o.inline_, size_ * sizeof(int64_t));
    }
    o.size_ = 0;
  }
  void release() {
    delete[] heap_;
    heap_ = nullptr;
  }

  int64_t inline_[kInline];
  int64_t* heap_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
};

}  // namespace dyngrad
