// cycles.cpp: the suspect registry of Note [Cycles through C++]. Noting is rare (hook registration, a gradient with
// history, a custom Function call), so a mutex is cheap enough and keeps threads safe.
#include "cycles.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace dyngrad {

namespace {
std::mutex g_mutex;
std::vector<std::weak_ptr<TensorImpl>> g_tensors;
std::vector<std::weak_ptr<Node>> g_nodes;
std::atomic<size_t> g_noted_since_scan{0};  // read without the lock by every backward()
size_t g_prune_at = 64;

template <class T>
void forget_dead(std::vector<std::weak_ptr<T>>& v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](const std::weak_ptr<T>& w) { return w.expired(); }), v.end());
}

// Keeps the registry proportional to the live suspects: prunes whenever it has doubled since the last prune.
void maybe_prune() {
  if (g_tensors.size() + g_nodes.size() < g_prune_at) return;
  forget_dead(g_tensors);
  forget_dead(g_nodes);
  g_prune_at = 2 * (g_tensors.size() + g_nodes.size()) + 64;
}
}  // namespace

void note_cycle_suspect(const Tensor& t) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (t->cycle_suspect) return;  // noted once for its whole life
  t->cycle_suspect = true;
  g_tensors.push_back(t);
  ++g_noted_since_scan;
  maybe_prune();
}

void note_cycle_suspect(const std::shared_ptr<Node>& n) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (n->cycle_suspect) return;
  n->cycle_suspect = true;
  g_nodes.push_back(n);
  ++g_noted_since_scan;
  maybe_prune();
}

void live_cycle_suspects(std::vector<Tensor>& tensors, std::vector<std::shared_ptr<Node>>& nodes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  forget_dead(g_tensors);
  forget_dead(g_nodes);
  g_prune_at = 2 * (g_tensors.size() + g_nodes.size()) + 64;
  g_noted_since_scan = 0;
  for (auto& w : g_tensors)
    if (Tensor t = w.lock()) tensors.push_back(std::move(t));
  for (auto& w : g_nodes)
    if (auto n = w.lock()) nodes.push_back(std::move(n));
}

size_t cycle_suspects_noted_since_scan() {
  return g_noted_since_scan.load(std::memory_order_relaxed);
}

}  // namespace dyngrad
