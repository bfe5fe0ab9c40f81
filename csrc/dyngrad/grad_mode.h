// grad_mode.h: whether ops record history, per thread (as torch's GradMode). no_grad / enable_grad /
// set_grad_enabled in Python flip this flag; the engine sets it to create_graph while it runs backward.
#pragma once

namespace dyngrad {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Sets grad mode for a scope and restores it after.
struct GradModeGuard {
  explicit GradModeGuard(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~GradModeGuard() { GradMode::set_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace dyngrad
