// autograd_bind.cpp: backward / grad, grad mode, hooks, graph introspection, and the node of a custom
// Python autograd.Function (the engine calls back into Python for it).
#include "common.h"
#include "dyngrad/kernels/gil.h"
#include "dyngrad/cycles.h"
#include "dyngrad/engine.h"
#include "dyngrad/errors.h"
#include "dyngrad/forward_ad.h"
#include "dyngrad/grad_mode.h"
#include "dyngrad/node.h"

namespace dyngrad {

namespace {

std::string type_name(py::handle o) { return py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>(); }

// 'name' of a hook function, as torch's messages put it ('<lambda>', 'scale', ...).
std::string hook_name(const py::function& fn) {
  py::object name = py::getattr(fn, "__name__", py::none());
  return "'" + (name.is_none() ? type_name(fn) : py::str(name).cast<std::string>()) + "'";
}

// Note [Hook results] in node.h: None, or a tensor of the shape and dtype of the gradient the hook was given.
Tensor checked_hook_result(const py::function& fn, py::handle r, const Tensor& g) {
  if (r.is_none()) return nullptr;
  DG_CHECK(is_tensor(r), TypeError, "hook ", hook_name(fn), " must return a Tensor or None, got ", type_name(r), ".");
  Tensor t = r.cast<Tensor>();
  if (!g) return t;
  DG_CHECK(t->shape == g->shape, RuntimeError, "hook ", hook_name(fn), " changed the shape of the gradient from ",
           shape_str(g->shape), " to ", shape_str(t->shape),
           "; a hook must return a gradient of the same shape and dtype, or None.");
  DG_CHECK(t->dtype == g->dtype, RuntimeError, "hook ", hook_name(fn), " changed the dtype of the gradient from ",
           dtype_name(g->dtype), " to ", dtype_name(t->dtype),
           "; a hook must return a gradient of the same shape and dtype, or None.");
  return t;
}

// Note [Saved tensor hooks] in node.h: what `pack(tensor)` returned, and the `unpack` to call on it. As torch's
// SavedVariable, the unpacked tensor gets the saved tensor's history back when grad mode is on (create_graph), so
// a double backward through hooked tensors is right: a non-leaf's grad_fn and output_nr are kept (not its data),
// and a leaf that requires grad is kept itself (the user holds it anyway) and returned in its place.
struct PyPackedSaved final : PackedSaved {
  py::object value, unpack_fn;
  std::shared_ptr<Node> grad_fn;
  uint32_t output_nr = 0;
  Tensor leaf;
  PyPackedSaved(py::object v, py::object u) : value(std::move(v)), unpack_fn(std::move(u)) {}
  ~PyPackedSaved() override {
    if (!may_take_gil()) {  // interpreter gone or going (kernels/gil.h): leak rather than touch Python
      value.release();
      unpack_fn.release();
      return;
    }
    py::gil_scoped_acquire gil;
    value = py::object();
    unpack_fn = py::object();
  }
  Tensor unpack() const override {
    py::gil_scoped_acquire gil;
    py::object r = unpack_fn(value);
    DG_CHECK(is_tensor(r), TypeError, "saved_tensors_hooks: the unpack hook must return a Tensor, got ", type_name(r),
             ".");
    Tensor t = r.cast<Tensor>();
    if (!GradMode::is_enabled()) return t;
    if (leaf) return leaf;
    if (grad_fn) {
      t = alias(t);
      t->requires_grad = true;
      t->grad_fn = grad_fn;
      t->output_nr = output_nr;
    }
    return t;
  }
};

}  // namespace

Tensor PyGradHook::operator()(const Tensor& g) const { return checked_hook_result(fn, fn(g), g); }

void PyNodePreHook::operator()(std::vector<Tensor>& grads) const {
  py::tuple args(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) args[i] = grads[i] ? py::cast(grads[i]) : py::none();
  py::object r = fn(args);
  if (r.is_none()) return;
  DG_CHECK(py::isinstance<py::tuple>(r) || py::isinstance<py::list>(r), TypeError, "hook ", hook_name(fn),
           " must return a tuple of gradients or None, got ", type_name(r), ".");
  py::sequence got = r.cast<py::sequence>();
  DG_CHECK(got.size() == grads.size(), RuntimeError, "hook ", hook_name(fn), " returned ", got.size(), " gradient",
           got.size() == 1 ? "" : "s", ", but the node has ", grads.size(), " output", grads.size() == 1 ? "" : "s",
           ".");
  std::vector<Tensor> replaced(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) replaced[i] = checked_hook_result(fn, got[i], grads[i]);
  grads = std::move(replaced);
}

void PyPostAccumulateGradHook::operator()(const Tensor& variable) const {
  py::object r = fn(variable);
  DG_CHECK(r.is_none(), RuntimeError, "a post-accumulate-grad hook must return None, got ",
           py::str(py::type::handle_of(r).attr("__name__")).cast<std::string>(), ".");
}

namespace {

GradHook wrap_hook(py::function fn) { return PyGradHook{std::move(fn)}; }

int64_t g_next_hook_id = 0;

// The node of a custom Function: ctx and backward are Python objects.
struct PyFunctionNode final : Node {
  py::object ctx;
  py::object backward_fn;
  std::string name_;
  std::vector<InputMeta> output_meta;
  std::vector<bool> output_is_tensor;  // per forward output (a non-tensor output gets None as its gradient)
  std::vector<bool> is_tensor_arg;  // per forward argument

  std::string name() const override { return display_name.empty() ? name_ : display_name; }
  uint32_t num_outputs() const override { return (uint32_t)output_meta.size(); }

  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (released) throw RuntimeError(err_backward_twice(name_) + created_at(*this));
    py::tuple args(grads.size() + 1);
    args[0] = ctx;
    const bool materialize = py::getattr(ctx, "materialize_grads", py::bool_(true)).cast<bool>();
    for (size_t i = 0; i < grads.size(); ++i) {  // missing gradients are zeros (torch's default) unless ctx says not
      Tensor g = grads[i];
      if (!g && materialize && output_is_tensor[i]) g = zeros(output_meta[i].shape, output_meta[i].dtype);
      args[i + 1] = g ? py::cast(g) : py::none();
    }
    py::object result = backward_fn(*args);
    py::tuple results = py::isinstance<py::tuple>(result) ? result.cast<py::tuple>() : py::make_tuple(result);
    std::string fn = name_.substr(0, name_.size() - 8);  // "MyFuncBackward" -> "MyFunc"
    size_t n = results.size();
    while (n > is_tensor_arg.size() && results[n - 1].is_none()) --n;  // torch allows trailing Nones
    DG_CHECK(n == is_tensor_arg.size(), RuntimeError, fn, ".backward returned ", n, " gradient", n == 1 ? "" : "s",
             ", but forward had ", is_tensor_arg.size(), " input", is_tensor_arg.size() == 1 ? "" : "s", ".");
    std::vector<Tensor> out;
    size_t edge = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!is_tensor_arg[i]) continue;
      py::handle r = results[i];
      Tensor g;
      if (!r.is_none()) {
        DG_CHECK(is_tensor(r), TypeError, fn, ".backward returned a ",
                 py::str(py::type::handle_of(r).attr("__name__")).cast<std::string>(), " for input ", i,
                 "; expected a Tensor or None.");
        g = r.cast<Tensor>();
        const Shape& want = input_meta[edge].shape;
        if (g->shape != want && shape_numel(g->shape) != shape_numel(want)) {
          try {
            broadcast_shapes(g->shape, want, "backward");
          } catch (const std::exception&) {
            throw RuntimeError(str_cat(fn, ".backward returned a gradient of shape ", shape_str(g->shape),
                                       " for input ", i, " of shape ", shape_str(want), "."));
          }
        }
      }
      out.push_back(g);
      ++edge;
    }
    return out;
  }
  void release_saved() override {
    released = true;
    if (py::hasattr(ctx, "_release")) ctx.attr("_release")();
  }
  void visit_python_objects(void (*visit)(void*, void*), void* arg) const override {
    visit(ctx.ptr(), arg);
    visit(backward_fn.ptr(), arg);
  }
  void clear_python_objects() override {  // garbage (Note [Cycles through C++]): ctx may hold our outputs
    ctx = py::none();
    backward_fn = py::none();
  }
};

std::vector<Tensor> as_tensor_list(py::handle o) {
  if (is_tensor(o)) return {o.cast<Tensor>()};
  std::vector<Tensor> out;
  for (auto item : o) out.push_back(item.is_none() ? nullptr : item.cast<Tensor>());
  return out;
}

}  // namespace

void bind_autograd(py::module_& m) {
  using py::arg;
  auto none = py::none();
  auto cls = py::reinterpret_borrow<py::class_<TensorImpl, Tensor>>(py::type::of<TensorImpl>());

  // ---- graph nodes (grad_fn) ----
  py::class_<Node, std::shared_ptr<Node>> node_class(m, "Node");
  name_as_public(node_class, "dyngrad.autograd.graph", "Node");  // published there, as torch.autograd.graph.Node
  node_class
      .def("name", &Node::name)
      // Note [Display names] (node.h): "" until the shared layer names the node after a composite op
      .def_property("_display_name", [](const Node& n) { return n.display_name; },
                    [](Node& n, std::string name) { n.display_name = std::move(name); })
      .def("__repr__", [](const Node& n) { return "<" + n.name() + ">"; })
      .def_property_readonly("next_functions", [](const Node& n) {
        py::tuple out(n.next_edges.size());
        for (size_t i = 0; i < n.next_edges.size(); ++i)
          out[i] = py::make_tuple(n.next_edges[i].fn ? py::cast(n.next_edges[i].fn) : py::none(),
                                  n.next_edges[i].input_nr);
        return out;
      })
      .def_property_readonly("variable", [](const Node& n) -> py::object {
        auto* acc = dynamic_cast<const AccumulateGrad*>(&n);
        if (!acc) throw py::attribute_error("only AccumulateGrad nodes have .variable");
        Tensor variable = acc->variable;  // a non-const holder: casting the const member crashed in init_instance
        return py::cast(std::move(variable));
      })
      .def_property_readonly("sequence_nr", [](const Node& n) { return n.sequence_nr; })
      .def_property_readonly("released", [](const Node& n) { return n.released; })
      .def_property_readonly("input_shapes", [](const Node& n) {
        py::list out;
        for (auto& meta : n.input_meta) out.append(make_size(meta.shape));
        return out;
      })
      .def("saved_tensors_info", [](const Node& n) {
        // (shape, dtype, bytes) of each tensor the node holds for backward
        py::list out;
        if (auto* fn = dynamic_cast<const PyFunctionNode*>(&n)) {  // a custom Function: ctx.save_for_backward
          py::object saved = py::getattr(fn->ctx, "_saved", py::none());
          if (fn->released || saved.is_none()) return out;
          for (auto entry : saved) {
            py::object t = py::reinterpret_borrow<py::tuple>(entry)[0];
            if (t.is_none()) continue;
            Tensor s = t.cast<Tensor>();
            out.append(py::make_tuple(make_size(s->shape), dtype_object(s->dtype), s->numel * (int64_t)s->itemsize()));
          }
          return out;
        }
        for (const SavedTensor* s : n.saved_tensors()) {
          if (!s->data) continue;
          out.append(py::make_tuple(make_size(s->data->shape), dtype_object(s->data->dtype),
                                    s->data->numel * (int64_t)s->data->itemsize()));
        }
        return out;
      })
      .def("_saved_fields", [](Node& n) {
        // {name: value} of what the node saved for backward, in declared order (Note [Named saved state]):
        // tensors unpacked (so a released node raises ERR_BACKWARD_TWICE), optional numbers None when absent
        py::dict out;
        for (const SavedField& f : n.saved_fields()) {
          if (f.tensor) {
            Tensor t = f.tensor->unpack(n);
            out[f.name] = t ? py::cast(std::move(t)) : py::none();
            continue;
          }
          out[f.name] = std::visit(
              [](const auto& v) -> py::object {
                using V = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<V, std::monostate>) return py::none();
                else if constexpr (std::is_same_v<V, Dims>) return py::tuple(py::cast(v));
                else return py::cast(v);
              },
              f.value);
        }
        return out;
      })
      .def_property_readonly("input_metadata", [](const Node& n) {
        py::list out;  // (shape, dtype) of each forward input
        for (auto& meta : n.input_meta) out.append(py::make_tuple(make_size(meta.shape), dtype_object(meta.dtype)));
        return out;
      })
      .def_property_readonly("call_site", [](Node& n) -> py::object {
        // (file, line, function) of the Python code that created the node (Note [Call sites]), or None
        if (n.call_site.empty()) return py::none();
        return py::make_tuple(n.call_site.file(), n.call_site.lineno(), n.call_site.function());
      })
      .def_property_readonly("forward_traceback", [](Node& n) -> py::object {
        // the formatted stack of the forward call, recorded in anomaly mode only (Note [Anomaly mode])
        if (!n.call_site.traceback) return py::none();
        return py::str("").attr("join")(py::reinterpret_borrow<py::object>(n.call_site.traceback));
      })
      .def("register_prehook", [](Node& n, py::function fn) {
        // fn(grad_outputs: tuple) -> None or a tuple replacing them, as torch's Node.register_prehook
        int64_t id = g_next_hook_id++;
        n.node_pre_hooks.push_back({id, PyNodePreHook{std::move(fn)}});
        std::shared_ptr<Node> self = n.shared_from_this();
        note_cycle_suspect(self);
        return py_helper("RemovableHandle")(py::cast(self), id);
      })
      .def("_remove_hook", [](Node& n, int64_t id) {  // RemovableHandle.remove()
        auto& hs = n.node_pre_hooks;
        hs.erase(std::remove_if(hs.begin(), hs.end(), [id](auto& h) { return h.first == id; }), hs.end());
      });

  // ---- debugging switches (debug.h), used by python/dyngrad/autograd/_engine_debug.py ----
  m.def("_set_record_call_sites", [](bool on) { g_record_call_sites = on; }, arg("on"));
  m.def("_is_recording_call_sites", [] { return g_record_call_sites; });
  m.def("_set_anomaly_enabled", [](bool on) { g_anomaly_mode = on; }, arg("on"));
  m.def("_is_anomaly_enabled", [] { return g_anomaly_mode; });
  m.def("_set_call_site_skip_dir", &set_skip_dir, arg("skip_dir"), arg("user_dir"), arg("api_dir"));
  m.def("_set_track_nodes", &set_track_nodes, arg("on"));
  m.def("_tracked_node_count", &tracked_node_count);
  m.def("_bridging_nodes", &bridging_nodes);
  m.def("_set_backward_observer", [](py::object fn) {
    if (fn.is_none()) {
      g_backward_observer = nullptr;
      return;
    }
    // At exit the global may outlive the interpreter: then the reference is dropped without a decref.
    std::shared_ptr<py::object> held(new py::object(fn), [](py::object* p) {
      if (!Py_IsInitialized()) p->release();
      delete p;
    });
    g_backward_observer = [held] { (*held)(); };
  }, arg("fn"));

  // ---- forward AD (Note [Dual tensors] in forward_ad.h): the core of autograd/forward_ad.py ----
  m.def("_enter_dual_level", &forward_ad::enter_level);
  m.def("_exit_dual_level", &forward_ad::exit_level, arg("level"));
  m.def("_current_dual_level", &forward_ad::current_level);
  m.def("_open_dual_levels", &forward_ad::open_levels);
  m.def("_get_tangent", [](const Tensor& t, int64_t level) -> py::object {
    Tensor tangent = forward_ad::tangent_of(t, level);
    return tangent ? py::cast(tangent) : py::none();
  }, arg("t"), arg("level"));
  m.def("_set_tangent", [](const Tensor& t, int64_t level, py::object tangent) {
    forward_ad::set_tangent(t, level, tangent.is_none() ? nullptr : tangent.cast<Tensor>());
  }, arg("t"), arg("level"), arg("tangent"));

  // ---- grad mode ----
  m.def("is_grad_enabled", &GradMode::is_enabled);
  m.def("_set_grad_enabled", &GradMode::set_enabled, arg("mode"));

  // ---- backward: the one entry point of Tensor.backward, autograd.backward and autograd.grad ----
  // grads: one per root, None for a scalar root (ones). accumulate=True adds into the leaves' .grad (only into
  // `inputs` when some are given); accumulate=False returns the gradients of `inputs` and touches no .grad.
  m.def("_run_backward", [](py::handle roots, py::handle grads, py::handle inputs, bool retain_graph,
                            bool create_graph, bool accumulate, bool allow_unused) -> py::object {
    maybe_collect_cycles();
    std::vector<Tensor> rs = as_tensor_list(roots);
    std::vector<Tensor> gs = grads.is_none() ? std::vector<Tensor>(rs.size()) : as_tensor_list(grads);
    DG_CHECK(gs.size() == rs.size(), RuntimeError, "backward: got ", gs.size(), " gradients for ", rs.size(),
             " outputs; they must match.");
    std::vector<Tensor> ins = inputs.is_none() ? std::vector<Tensor>{} : as_tensor_list(inputs);
    BackwardOptions opt;
    opt.create_graph = create_graph;
    opt.retain_graph = retain_graph;
    if (accumulate && ins.empty()) {
      run_backward(rs, gs, {}, opt);
      return py::none();
    }
    opt.accumulate = false;
    opt.allow_unused = allow_unused || accumulate;
    std::vector<Tensor> got = run_backward(rs, gs, ins, opt);
    if (accumulate) {  // backward(inputs=...): accumulate only into those
      GradModeGuard mode(create_graph);
      for (size_t i = 0; i < ins.size(); ++i) {
        if (!got[i]) continue;
        Tensor g = create_graph ? got[i] : contiguous_copy(got[i], got[i]->dtype);
        ins[i]->grad = ins[i]->grad ? add(ins[i]->grad, g) : g;
        note_grad_assigned(ins[i]);
        if (ins[i]->is_leaf()) run_post_accumulate_hooks(ins[i]);
      }
      return py::none();
    }
    py::tuple out(got.size());
    for (size_t i = 0; i < got.size(); ++i) out[i] = got[i] ? py::cast(got[i]) : py::none();
    return out;
  }, arg("roots"), arg("grads"), arg("inputs"), arg("retain_graph"), arg("create_graph"), arg("accumulate"),
     arg("allow_unused"));

  // ---- hooks ----
  cls.def("register_hook", [](const Tensor& self, py::object hook) {
    // checked here, not by pybind11's py::function caster, whose error lists C++ signatures
    DG_CHECK(PyCallable_Check(hook.ptr()), TypeError, "register_hook: expected a callable as hook, got ",
             py::str(py::type::handle_of(hook).attr("__name__")).cast<std::string>(), ".");
    auto fn = py::reinterpret_borrow<py::function>(hook);
    DG_CHECK(self->requires_grad, RuntimeError,
             "cannot register a hook on a tensor that doesn't require gradient.");
    int64_t id = g_next_hook_id++;
    if (self->is_leaf()) {
      self->hooks.push_back({id, wrap_hook(fn)});
      note_cycle_suspect(self);
    } else {
      self->grad_fn->pre_hooks.push_back({self->output_nr, {id, wrap_hook(fn)}});
      note_cycle_suspect(self->grad_fn);
    }
    return py_helper("RemovableHandle")(py::cast(self), id);
  });
  cls.def("register_post_accumulate_grad_hook", [](const Tensor& self, py::object fn) {
    DG_CHECK(PyCallable_Check(fn.ptr()), TypeError, "register_post_accumulate_grad_hook: hook must be callable, got ",
             py::str(py::type::handle_of(fn).attr("__name__")).cast<std::string>(), ".");
    DG_CHECK(self->requires_grad, RuntimeError,
             "register_post_accumulate_grad_hook: cannot register a hook on a tensor that doesn't require gradient.");
    DG_CHECK(self->is_leaf(), RuntimeError,
             "register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered on non-leaf "
             "tensors (this one has grad_fn=", self->grad_fn->name(), ").");
    int64_t id = g_next_hook_id++;
    self->post_accumulate_hooks.push_back({id, PyPostAccumulateGradHook{py::reinterpret_borrow<py::function>(fn)}});
    note_cycle_suspect(self);
    return py_helper("RemovableHandle")(py::cast(self), id);
  });
  cls.def("_remove_hook", [](const Tensor& self, int64_t id) {
    auto& hs = self->hooks;
    hs.erase(std::remove_if(hs.begin(), hs.end(), [id](auto& h) { return h.first == id; }), hs.end());
    auto& post = self->post_accumulate_hooks;
    post.erase(std::remove_if(post.begin(), post.end(), [id](auto& h) { return h.first == id; }), post.end());
    if (self->grad_fn) {
      auto& ph = self->grad_fn->pre_hooks;
      ph.erase(std::remove_if(ph.begin(), ph.end(), [id](auto& h) { return h.second.first == id; }), ph.end());
    }
  });
  cls.def("retain_grad", [](const Tensor& self) {
    DG_CHECK(self->requires_grad, RuntimeError, "can't retain_grad on a tensor that doesn't require grad.");
    if (self->is_leaf() || self->retains_grad) return;
    self->retains_grad = true;
    self->grad_fn->retained.push_back({self->output_nr, self});
  });

  // Note [Final callbacks] (engine.h): fn() runs when the backward pass now running ends, before it returns.
  m.def("_queue_callback", [](py::object fn) {
    DG_CHECK(PyCallable_Check(fn.ptr()), TypeError, "_queue_callback: callback must be callable, got ",
             py::str(py::type::handle_of(fn).attr("__name__")).cast<std::string>(), ".");
    queue_callback([fn = std::move(fn)] { fn(); });
  }, arg("callback"));

  // Note [Saved tensor hooks]: pack/unpack for every tensor a node saves on this thread from now on; None, None
  // turns them off. The stack of nested saved_tensors_hooks contexts is kept in Python (autograd/graph.py).
  m.def("_set_saved_tensors_hooks", [](py::object pack, py::object unpack) {
    if (pack.is_none()) {
      set_pack_hook(nullptr);
      return;
    }
    set_pack_hook(std::make_shared<PackHook>([pack, unpack](const Tensor& t) -> std::shared_ptr<PackedSaved> {
      py::gil_scoped_acquire gil;
      py::object v = pack(t);
      auto packed = std::make_shared<PyPackedSaved>(std::move(v), unpack);
      if (t->grad_fn) {
        packed->grad_fn = t->grad_fn;
        packed->output_nr = t->output_nr;
      } else if (t->requires_grad) {
        packed->leaf = t;
      }
      return packed;
    }));
  }, arg("pack"), arg("unpack"));

  // ---- custom Functions ----
  // Makes `outputs` the outputs of a PyFunctionNode whose inputs are the tensors among `args`.
  m.def("_record_function", [](py::object ctx, py::object backward_fn, const std::string& name, py::list args,
                               py::list outputs, py::list non_differentiable) {
    auto node = std::make_shared<PyFunctionNode>();
    note_node_created(*node);  // Note [Call sites]
    note_cycle_suspect(std::static_pointer_cast<Node>(node));  // ctx may come to hold an output
    node->ctx = ctx;
    node->backward_fn = backward_fn;
    node->name_ = name;
    std::vector<Tensor> inputs;
    std::vector<const Tensor*> ptrs;
    for (auto a : args) {
      bool t = is_tensor(a);
      node->is_tensor_arg.push_back(t);
      if (t) inputs.push_back(a.cast<Tensor>());
    }
    for (auto& t : inputs) ptrs.push_back(&t);
    collect_next_edges(*node, ptrs);
    uint32_t nr = 0;
    for (auto o : outputs) {
      bool tensor = is_tensor(o);
      node->output_is_tensor.push_back(tensor);
      if (!tensor) {
        node->output_meta.push_back({{}, DType::Float32});
        ++nr;
        continue;
      }
      Tensor t = o.cast<Tensor>();
      node->output_meta.push_back({t->shape, t->dtype});
      bool skip = false;
      for (auto nd : non_differentiable)
        if (nd.ptr() == o.ptr()) skip = true;
      if (!skip && is_differentiable(t->dtype)) set_history(t, node, nr);
      ++nr;
    }
    return std::shared_ptr<Node>(node);
  }, arg("ctx"), arg("backward_fn"), arg("name"), arg("args"), arg("outputs"), arg("non_differentiable"));
}

}  // namespace dyngrad
