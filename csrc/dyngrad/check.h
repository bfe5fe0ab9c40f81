// check.h: how the C++ core reports bad input. Each exception type becomes the Python type torch users expect:
//   ValueError   <- std::invalid_argument     IndexError <- std::out_of_range (also IndexError below)
//   RuntimeError <- std::runtime_error        TypeError  <- dyngrad::TypeError
//   MemoryError  <- std::bad_alloc (MemoryError below carries a message)
// Messages are built from streamable pieces: DG_CHECK(ok, RuntimeError, "matmul: ", shape_str(a), ...).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <cstdint>
#include <new>

namespace dyngrad {

struct TypeError : std::runtime_error { using std::runtime_error::runtime_error; };
struct IndexError : std::out_of_range { using std::out_of_range::out_of_range; };
struct ValueError : std::invalid_argument { using std::invalid_argument::invalid_argument; };
using RuntimeError = std::runtime_error;
struct NotImplementedError : std::runtime_error { using std::runtime_error::runtime_error; };
// Python's MemoryError with a message (pybind11 translates every std::bad_alloc to MemoryError, using what()).
struct MemoryError : std::bad_alloc {
  explicit MemoryError(std::string m) : msg(std::move(m)) {}
  const char* what() const noexcept override { return msg.c_str(); }
  std::string msg;
};

template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// "(3, 4)", "()" and "(5,)", as Python prints tuples.
std::string shape_str(const std::vector<int64_t>& shape);

#define DG_CHECK(cond, ExcType, ...)                                  \
  do {                                                                \
    if (__builtin_expect(!(cond), 0)) throw ExcType(::dyngrad::str_cat(__VA_ARGS__)); \
  } while (0)

}  // namespace dyngrad
