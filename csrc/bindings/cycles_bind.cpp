// cycles_bind.cpp: the collector of Note [Cycles through C++] (dyngrad/cycles.h).
//
// It works as CPython's gc does, by trial deletion, over a graph that mixes our C++ objects and Python objects:
//   1. discover everything reachable from the live suspects: tensors and nodes through the shared_ptrs they own,
//      Python objects through the hooks and custom-Function nodes that hold them, and onwards through
//      tp_traverse (a Tensor's Python object leads to its TensorImpl, a Node's to its Node);
//   2. count, for each object, the references coming from the objects found; an object with more references
//      than that (shared_ptr use_count, or the Python refcount) is held from outside, so it and everything it
//      reaches is alive;
//   3. in what is left (garbage: only reachable through itself), drop the references that can close a cycle:
//      tensor hooks (post-accumulate-grad hooks too), `.grad`, node pre-hooks and a node's Python objects.
//      Reference counting frees the rest.
// Missing an edge only makes an object look held from outside, so every shortcut taken here (functions' globals,
// modules and types are not followed; C++ hooks that are not Python functions are opaque) errs towards keeping
// garbage, never towards freeing something alive. Python code never runs during steps 1 and 2, so the borrowed
// PyObject pointers stay valid; the C++ objects are held by the scan until it ends.
#include <unordered_map>

#include "common.h"
#include "dyngrad/cycles.h"

namespace dyngrad {

namespace {

enum class Kind : uint8_t { Tensor, Node, Python };

struct Object {
  Kind kind = Kind::Python;
  Tensor tensor;               // Kind::Tensor (held: keeps it alive while the scan runs)
  std::shared_ptr<Node> node;  // Kind::Node (held)
  PyObject* python = nullptr;  // Kind::Python (borrowed)
  int64_t references = 0;      // all references to it: use_count (less the scan's own) or the refcount
  int64_t internal = 0;        // references from other objects the scan found
  bool alive = false;
  std::vector<uint32_t> refers_to;
};

// Beyond this many objects the scan gives up and frees nothing (a hook whose closure reaches a huge heap).
constexpr size_t kMaxObjects = 1u << 20;

class CycleScan {
 public:
  std::vector<Object> objects;
  bool gave_up = false;

  // By value: the scan's own copy is the one reference use_count includes beyond the object's real holders.
  uint32_t add(Tensor t) {
    return add_object(t.get(), [&](Object& o) {
      o.kind = Kind::Tensor;
      o.references = t.use_count() - 1;
      o.tensor = std::move(t);
    });
  }
  uint32_t add(std::shared_ptr<Node> n) {
    return add_object(n.get(), [&](Object& o) {
      o.kind = Kind::Node;
      o.references = n.use_count() - 1;
      o.node = std::move(n);
    });
  }
  uint32_t add(PyObject* p) {
    return add_object(p, [&](Object& o) {
      o.kind = Kind::Python;
      o.python = p;
      o.references = Py_REFCNT(p);
    });
  }

  // Step 1: discovery, breadth first (iterative: graphs are deep).
  void discover() {
    for (size_t i = 0; i < objects.size() && !gave_up; ++i) {
      std::vector<uint32_t> out;
      collect_references(i, out);
      for (uint32_t j : out) ++objects[j].internal;
      objects[i].refers_to = std::move(out);
    }
  }

  // Step 2: what is held from outside, and everything it reaches, is alive. False if the counts are inconsistent.
  bool mark_alive() {
    std::vector<uint32_t> stack;
    for (uint32_t i = 0; i < objects.size(); ++i) {
      if (objects[i].internal > objects[i].references) return false;
      if (objects[i].internal < objects[i].references) {
        objects[i].alive = true;
        stack.push_back(i);
      }
    }
    while (!stack.empty()) {
      uint32_t i = stack.back();
      stack.pop_back();
      for (uint32_t j : objects[i].refers_to)
        if (!objects[j].alive) {
          objects[j].alive = true;
          stack.push_back(j);
        }
    }
    return true;
  }

 private:
  std::unordered_map<const void*, uint32_t> index_;
  PyTypeObject* tensor_type_ = (PyTypeObject*)py::type::of<TensorImpl>().ptr();
  PyTypeObject* node_type_ = (PyTypeObject*)py::type::of<Node>().ptr();

  // The index of the object at `key`, filled in by `fill` the first time it is seen.
  template <class Fill>
  uint32_t add_object(const void* key, Fill&& fill) {
    auto [it, fresh] = index_.try_emplace(key, (uint32_t)objects.size());
    if (fresh) {
      if (objects.size() >= kMaxObjects) gave_up = true;
      fill(objects.emplace_back());
    }
    return it->second;
  }

  static void add_python_hooks(CycleScan& scan, const GradHook& hook, std::vector<uint32_t>& out) {
    if (const PyGradHook* h = hook.target<PyGradHook>()) out.push_back(scan.add(h->fn.ptr()));
  }
  static void add_python_hooks(CycleScan& scan, const PostAccumulateGradHook& hook, std::vector<uint32_t>& out) {
    if (const auto* h = hook.target<PyPostAccumulateGradHook>()) out.push_back(scan.add(h->fn.ptr()));
  }

  struct VisitArgs {
    CycleScan* scan;
    std::vector<uint32_t>* out;
  };
  static int visit_python(PyObject* p, void* arg) {
    auto* a = static_cast<VisitArgs*>(arg);
    if (p) a->out->push_back(a->scan->add(p));
    return 0;
  }
  static void visit_node_object(void* p, void* arg) { visit_python(static_cast<PyObject*>(p), arg); }

  // The references object i holds, as indices (adding the objects not seen before).
  void collect_references(size_t i, std::vector<uint32_t>& out) {
    // copies: `objects` may grow (and move) while we add
    Kind kind = objects[i].kind;
    if (kind == Kind::Tensor) {
      Tensor t = objects[i].tensor;
      if (t->grad_fn) out.push_back(add(t->grad_fn));
      if (t->grad) out.push_back(add(t->grad));
      if (t->view_base) out.push_back(add(t->view_base));
      for (auto& [id, hook] : t->hooks) add_python_hooks(*this, hook, out);
      for (auto& [id, hook] : t->post_accumulate_hooks) add_python_hooks(*this, hook, out);
    } else if (kind == Kind::Node) {
      std::shared_ptr<Node> n = objects[i].node;
      for (auto& e : n->next_edges)
        if (e.fn) out.push_back(add(e.fn));
      if (n->pending0) out.push_back(add(n->pending0));
      for (auto& g : n->pending_rest)
        if (g) out.push_back(add(g));
      for (auto& [nr, hook] : n->pre_hooks) add_python_hooks(*this, hook.second, out);
      for (auto& [id, hook] : n->node_pre_hooks)
        if (const PyNodePreHook* h = hook.target<PyNodePreHook>()) out.push_back(add(h->fn.ptr()));
      for (const SavedTensor* s : n->saved_tensors())
        if (s->data) out.push_back(add(s->data));
      if (auto* acc = dynamic_cast<AccumulateGrad*>(n.get()))
        if (acc->variable) out.push_back(add(acc->variable));
      VisitArgs args{this, &out};
      n->visit_python_objects(&visit_node_object, &args);
    } else {
      PyObject* p = objects[i].python;
      if (PyObject_TypeCheck(p, tensor_type_)) out.push_back(add(py::handle(p).cast<Tensor>()));
      // a grad_fn held from Python (a closure's, or a node pre-hook's RemovableHandle) leads to its Node
      if (PyObject_TypeCheck(p, node_type_)) out.push_back(add(py::handle(p).cast<std::shared_ptr<Node>>()));
      // Not followed (allowed: see the top of the file): modules, types and code are held from outside anyway,
      // and a function's globals would pull in whole modules.
      if (PyModule_Check(p) || PyType_Check(p) || PyCode_Check(p)) return;
      VisitArgs args{this, &out};
      if (PyFunction_Check(p)) {
        for (PyObject* part : {PyFunction_GET_CLOSURE(p), PyFunction_GET_DEFAULTS(p), PyFunction_GET_KW_DEFAULTS(p)})
          visit_python(part, &args);
        return;
      }
      if (PyType_IS_GC(Py_TYPE(p)) && Py_TYPE(p)->tp_traverse) Py_TYPE(p)->tp_traverse(p, &visit_python, &args);
    }
  }
};

bool g_collecting = false;  // a hook dropped below may run Python code that starts the gc again

}  // namespace

int64_t collect_cycles() {
  if (g_collecting) return 0;
  g_collecting = true;
  struct Reset {
    ~Reset() { g_collecting = false; }
  } reset;

  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Node>> nodes;
  live_cycle_suspects(tensors, nodes);
  if (tensors.empty() && nodes.empty()) return 0;
  CycleScan scan;
  for (auto& t : tensors) scan.add(std::move(t));
  for (auto& n : nodes) scan.add(std::move(n));
  tensors.clear();
  nodes.clear();
  scan.discover();
  if (scan.gave_up || !scan.mark_alive()) return 0;

  // Step 3. The dropped references go to `dropped` first and die after the loop, so no Python code (a closure's
  // __del__) runs while garbage is being walked.
  std::vector<GradHook> dropped_hooks;
  std::vector<PostAccumulateGradHook> dropped_post_hooks;
  std::vector<NodePreHook> dropped_node_hooks;
  std::vector<Tensor> dropped_grads;
  std::vector<Node*> with_python_objects;
  int64_t freed = 0;
  for (Object& o : scan.objects) {
    if (o.alive || o.kind == Kind::Python) continue;
    ++freed;
    if (o.kind == Kind::Tensor) {
      for (auto& h : o.tensor->hooks) dropped_hooks.push_back(std::move(h.second));
      o.tensor->hooks.clear();
      for (auto& h : o.tensor->post_accumulate_hooks) dropped_post_hooks.push_back(std::move(h.second));
      o.tensor->post_accumulate_hooks.clear();
      if (o.tensor->grad) dropped_grads.push_back(std::move(o.tensor->grad));
    } else {
      for (auto& h : o.node->pre_hooks) dropped_hooks.push_back(std::move(h.second.second));
      o.node->pre_hooks.clear();
      for (auto& h : o.node->node_pre_hooks) dropped_node_hooks.push_back(std::move(h.second));
      o.node->node_pre_hooks.clear();
      with_python_objects.push_back(o.node.get());
    }
  }
  for (Node* n : with_python_objects) n->clear_python_objects();  // the scan still holds every node
  dropped_hooks.clear();
  dropped_post_hooks.clear();
  dropped_node_hooks.clear();
  dropped_grads.clear();
  scan.objects.clear();  // the last references to the garbage: it is freed here
  return freed;
}

void maybe_collect_cycles() {
  // backward() is a safe point (nothing half-built on the C++ stack) that every training loop passes, also when
  // Python's own gc rarely reaches its oldest generation (our tensors are not gc-tracked Python objects).
  constexpr size_t kSuspectsPerCollection = 1000;
  if (cycle_suspects_noted_since_scan() >= kSuspectsPerCollection) collect_cycles();
}

void bind_cycles(py::module_& m) {
  m.def("_collect_cycles", &collect_cycles,
        "Frees reference cycles that pass through C++ objects (Note [Cycles through C++]); returns how many "
        "tensors and graph nodes were garbage. dyngrad runs it when Python's gc collects its oldest generation.");
  m.def("_cycle_suspects_noted", &cycle_suspects_noted_since_scan);
}

}  // namespace dyngrad
