// Guard tree bindings: _C.GuardManager (the root) and _C.GuardNode (every other node).
//
// Python objects share ownership of their C++ node (std::shared_ptr holders): asking twice for a
// source returns the same Python object while it lives, and a child's wrapper keeps its subtree
// alive after the root's wrapper is gone (seeds 002, 003). C++ statuses become Python exceptions
// here: TypeError statuses (guard_errors.h) as TypeError, the rest through throw_if_error.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings/bindings.h"
#include "cpython/dict_version.h"
#include "guards/guard_errors.h"
#include "guards/guard_manager.h"
#include "guards/root_guard_manager.h"
#include "runtime/frame_handle.h"
#include "guards/torch_backend.h"

namespace tjc::bindings {

namespace {

void raise_if_error(const absl::Status& status) {
  if (!status.ok() && is_type_error(status) && !PyErr_Occurred()) {
    throw py::type_error(std::string(status.message()));
  }
  throw_if_error(status);
}

template <typename T>
T value_or_raise(absl::StatusOr<T> result) {
  raise_if_error(result.status());
  return std::move(*result);
}

SymbolRead parse_symbol_read(const std::string& kind) {
  if (kind == "size") return SymbolRead::kSize;
  if (kind == "stride") return SymbolRead::kStride;
  if (kind == "storage_offset") return SymbolRead::kStorageOffset;
  if (kind == "int") return SymbolRead::kInt;
  throw py::value_error("symbolic_shapes: a binding reads 'size', 'stride', 'storage_offset' or 'int', not '" +
                        kind + "'");
}

// [(op name, operand), ...] -> a validated ShapeProgram.
ShapeProgram parse_program(const std::vector<std::pair<std::string, int64_t>>& code, size_t num_symbols) {
  std::vector<ShapeInstr> instrs;
  instrs.reserve(code.size());
  for (const auto& [name, operand] : code) {
    instrs.push_back(ShapeInstr{value_or_raise(ShapeProgram::parse_op(name)), operand});
  }
  return value_or_raise(ShapeProgram::make(std::move(instrs), num_symbols));
}

// A mapping-mode view for Python callers, with the objects it borrows kept alive.
struct PythonView {
  py::object mapping;
  py::object globals;
  py::object builtins;
  FrameView view;
};

// `frame_or_mapping`: a dict of locals (and closure variables) by name, any other mapping (copied
// into a dict), a frame object (its f_locals, f_globals and f_builtins), or the runtime's Frame
// handle inside an eval-frame callback (the same three). Builtins come from
// globals['__builtins__'] when present, else the caller's builtins.
PythonView make_view(py::handle frame_or_mapping, py::handle globals) {
  PythonView out;
  if (py::isinstance<FrameHandle>(frame_or_mapping)) {
    // The frame an eval-frame callback was handed: its arguments and closure contents, read
    // without changing the frame (the handle raises once the callback has returned).
    py::object handle = py::reinterpret_borrow<py::object>(frame_or_mapping);
    out.mapping = handle.attr("f_locals");
    out.globals = handle.attr("f_globals");
    out.builtins = handle.attr("f_builtins");
  } else if (PyFrame_Check(frame_or_mapping.ptr())) {
    out.mapping = py::dict(frame_or_mapping.attr("f_locals"));
    out.globals = frame_or_mapping.attr("f_globals");
    out.builtins = frame_or_mapping.attr("f_builtins");
  } else {
    out.mapping = PyDict_Check(frame_or_mapping.ptr())
                      ? py::reinterpret_borrow<py::object>(frame_or_mapping)
                      : py::object(py::dict(py::reinterpret_borrow<py::object>(frame_or_mapping)));
    if (!globals.is_none()) {
      if (!PyDict_Check(globals.ptr())) throw py::type_error("globals must be a dict or None");
      out.globals = py::reinterpret_borrow<py::object>(globals);
      PyObject* builtins = PyDict_GetItemString(globals.ptr(), "__builtins__");  // borrowed
      if (builtins != nullptr) {
        out.builtins = PyModule_Check(builtins)
                           ? py::reinterpret_borrow<py::object>(PyModule_GetDict(builtins))
                           : py::reinterpret_borrow<py::object>(builtins);
      }
    }
    // The caller's builtins (borrowed from the running frame, or the interpreter's).
    if (!out.builtins) out.builtins = py::reinterpret_borrow<py::object>(PyEval_GetBuiltins());
  }
  out.view.mapping = out.mapping.ptr();
  out.view.globals = out.globals ? out.globals.ptr() : nullptr;
  out.view.builtins = out.builtins.ptr();
  return out;
}

}  // namespace

void init_guards(py::module_& m) {
  using NodePtr = std::shared_ptr<GuardManager>;
  using RootPtr = std::shared_ptr<RootGuardManager>;
  // Whether GuardNode.dict_tags() is available on this Python (cpython/dict_version.h).
  m.attr("DICT_TAGS_SUPPORTED") = cpython::kDictTagsFollowEveryChange;

  py::class_<GuardManager, NodePtr> node(m, "GuardNode", R"doc(
One source of a guard tree (L['x'], L['self'].fc, ...): made by the GuardManager builder methods,
never directly. Child getters return the same object for the same source.)doc");
  node.def("type_match", [](GuardManager& self, py::object cls) { raise_if_error(self.add_type_match(cls)); },
           py::arg("cls"))
      .def("id_match",
           [](GuardManager& self, py::object obj, bool strong) {
             raise_if_error(self.add_id_match(obj, strong ? IdHold::kStrong : IdHold::kWeak));
           },
           py::arg("obj"), py::kw_only(), py::arg("strong") = false,
           "value is obj; obj is held weakly and its death invalidates the tree, or strongly when "
           "strong=True (for objects that live as long as the process: torch.dtype, ...).")
      .def("equals_match",
           [](GuardManager& self, py::object value) { raise_if_error(self.add_equals_match(value)); },
           py::arg("value"))
      .def("none_match", [](GuardManager& self) { raise_if_error(self.add_none_match()); })
      .def("not_none", [](GuardManager& self) { raise_if_error(self.add_not_none()); })
      .def("bool_match", [](GuardManager& self, bool b) { raise_if_error(self.add_bool_match(b)); },
           py::arg("b"))
      .def("length", [](GuardManager& self, Py_ssize_t n) { raise_if_error(self.add_length(n)); },
           py::arg("n"))
      .def("dict_keys", [](GuardManager& self, py::object keys) { raise_if_error(self.add_dict_keys(keys)); },
           py::arg("keys"), "value is a dict with exactly these keys, in this order.")
      .def("tensor_match",
           [](GuardManager& self, py::object example, std::vector<int> dynamic_sizes,
              std::vector<int> dynamic_strides) {
             raise_if_error(self.add_tensor_match(example, DynamicDims{std::move(dynamic_sizes),
                                                                       std::move(dynamic_strides)}));
           },
           py::arg("example"), py::arg("dynamic_sizes") = std::vector<int>(),
           py::arg("dynamic_strides") = std::vector<int>(),
           "TENSOR_MATCH on a real example tensor; the sizes / strides of the dims named in "
           "dynamic_sizes / dynamic_strides are not checked (a SYMBOLIC_SHAPES guard checks them).")
      .def("dict_tags", [](GuardManager& self) { raise_if_error(self.add_dict_tags()); },
           "DICT_TAGS: the children are skipped while the dicts they read are unchanged (version "
           "tags); what tags cannot vouch for (TENSOR_MATCH, ...) runs every time.")
      .def_property_readonly(
          "dict_tags_state",
          [](const GuardManager& self) -> py::object {
            const DictTags* tags = self.dict_tags();
            if (tags == nullptr) return py::none();
            py::dict out;
            out["recorded"] = tags->recorded();
            out["dicts"] = tags->num_dicts();
            out["residuals"] = tags->num_residuals();
            return out;
          },
          "None without DICT_TAGS; else {'recorded', 'dicts', 'residuals'} of the last check.")
      .def_property_readonly("source", &GuardManager::source)
      .def_property_readonly("fail_count", &GuardManager::fail_count)
      .def("num_guards", &GuardManager::num_guards, "Leaf guards in this subtree.")
      .def("debug_string", &GuardManager::debug_string)
      .def("__str__", &GuardManager::debug_string)
      .def("__repr__", [](const GuardManager& self) {
        std::string name = self.is_root() ? "GuardManager" : "GuardNode " + self.source();
        return "<" + name + ": " + std::to_string(self.num_guards()) + " guards>";
      });

  py::class_<RootGuardManager, GuardManager, RootPtr> root(m, "GuardManager", R"doc(
The root of a guard tree: the frame being checked. Build it with local/global_/builtin/closure and
the leaf methods; bind(code) freezes it for a cache entry; check/explain take a dict of locals (or
a frame) and an optional globals dict.)doc");
  // One builder method per accessor kind, named and documented by its row of kAccessorSpecs: kinds
  // that read the frame on the root (GuardManager), kinds that read a value on every node.
  for (const AccessorSpec& spec : kAccessorSpecs) {
    const AccessorKind kind = spec.kind;
    // `self` is typed as the class the method is on, so signatures and errors name that class.
    auto add = [&spec, kind](auto& cls, auto self_type) {
      using Self = typename decltype(self_type)::type;
      switch (spec.operand) {
        case Operand::kName:
          cls.def(
              spec.builder, [kind](Self& self, py::str name) { return value_or_raise(self.child(kind, name)); },
              py::arg("name"), spec.doc);
          break;
        case Operand::kKey:
          cls.def(
              spec.builder, [kind](Self& self, py::object key) { return value_or_raise(self.child(kind, key)); },
              py::arg("key"), spec.doc);
          break;
        case Operand::kNone:
          cls.def(spec.builder, [kind](Self& self) { return value_or_raise(self.child(kind)); }, spec.doc);
          break;
      }
    };
    if (spec.reads == Reads::kFrame) add(root, std::type_identity<RootGuardManager>());
    if (spec.reads == Reads::kParent) add(node, std::type_identity<GuardManager>());
  }
  root.def(py::init<>())
      .def("global_state", [](RootGuardManager& self) { raise_if_error(self.add_global_state()); })
      .def("bind",
           [](RootGuardManager& self, py::object code) {
             if (!PyCode_Check(code.ptr())) throw py::type_error("bind() needs a code object");
             raise_if_error(self.bind(reinterpret_cast<PyCodeObject*>(code.ptr())));
           },
           py::arg("code"))
      .def_property_readonly("bound", &RootGuardManager::bound)
      .def_property_readonly("invalidated", &RootGuardManager::invalidated)
      .def("has_identity_guards", &RootGuardManager::has_identity_guards)
      .def("identity_relation",
           [](RootGuardManager& self, std::vector<NodePtr> nodes, std::vector<int> classes) {
             raise_if_error(self.add_identity_relation(nodes, classes));
           },
           py::arg("nodes"), py::arg("classes"),
           "OBJECT_ALIASING: nodes[i] and nodes[j] must reach one object exactly when classes[i] == "
           "classes[j] (classes[i]: the first index whose object was i's when compiled). Checked "
           "after the tree passed; holds no object.")
      .def("symbolic_shapes",
           [](RootGuardManager& self, const std::vector<std::tuple<NodePtr, std::string, int, int>>& bindings,
              size_t num_symbols,
              const std::vector<std::tuple<int, std::optional<int64_t>, std::optional<int64_t>>>& ranges,
              const std::vector<std::vector<std::pair<std::string, int64_t>>>& exprs) {
             std::vector<RootGuardManager::ShapeBinding> parsed;
             for (const auto& [node, kind, dim, symbol] : bindings) {
               parsed.push_back({node, parse_symbol_read(kind), dim, symbol});
             }
             std::vector<ShapeGuards::Range> parsed_ranges;
             for (const auto& [symbol, min, max] : ranges) parsed_ranges.push_back({symbol, min, max});
             std::vector<ShapeProgram> programs;
             for (const auto& code : exprs) programs.push_back(parse_program(code, num_symbols));
             raise_if_error(self.add_shape_guards(parsed, num_symbols, std::move(parsed_ranges), std::move(programs)));
           },
           py::arg("bindings"), py::arg("num_symbols"), py::arg("ranges"), py::arg("exprs"),
           "SYMBOLIC_SHAPES: bindings [(node, 'size'|'stride'|'storage_offset'|'int', dim, symbol)], "
           "ranges [(symbol, min or None, max or None)], exprs [[(op, operand), ...]] (postfix programs, "
           "torch_jit_cache.shape_guards.compile_expr). Checked after the tree passed; holds no object.")
      .def("check",
           [](RootGuardManager& self, py::handle frame_or_mapping, py::handle globals) {
             PythonView view = make_view(frame_or_mapping, globals);
             return self.check(view.view);
           },
           py::arg("frame_or_mapping"), py::arg("globals") = py::none())
      .def("explain",
           [](RootGuardManager& self, py::handle frame_or_mapping, py::handle globals) {
             PythonView view = make_view(frame_or_mapping, globals);
             return self.explain(view.view);
           },
           py::arg("frame_or_mapping"), py::arg("globals") = py::none())
      .def("set_invalidation_callback",
           [](RootGuardManager& self, py::object callback) {
             if (callback.is_none()) {
               self.set_invalidation_callback(nullptr);
               return;
             }
             // The tree holds the callable strongly until it runs: a callable that refers back to
             // this GuardManager makes a cycle no collector sees. Tests and tools only.
             self.set_invalidation_callback([callback = std::move(callback)]() noexcept {
               PyObject* result = PyObject_CallNoArgs(callback.ptr());  // new ref
               if (result == nullptr) {
                 PyErr_WriteUnraisable(callback.ptr());
               } else {
                 Py_DECREF(result);
               }
             });
           },
           py::arg("callback"),
           "callback() runs once when a weakly held object dies (now, if one already has).");

  m.attr("_shape_program_max_depth") = ShapeProgram::kMaxDepth;
  m.def(
      "_shape_program_text",
      [](const std::vector<std::pair<std::string, int64_t>>& code, const std::vector<std::string>& names) {
        return parse_program(code, names.size()).text(names);
      },
      py::arg("code"), py::arg("names"), "The infix text of a postfix program (tests).");
  m.def(
      "_shape_program_evaluate",
      [](const std::vector<std::pair<std::string, int64_t>>& code, const std::vector<int64_t>& values) {
        return shape_verdict_text(parse_program(code, values.size()).evaluate(values.data()));
      },
      py::arg("code"), py::arg("values"),
      "'true', 'false', 'overflows int64', 'divides by zero' or 'is out of an operation's domain' (tests).");
  m.def("_torch_backend_status",
        []() -> py::tuple {
          absl::StatusOr<TorchBackend*> backend = torch_backend();
          if (backend.ok()) return py::make_tuple(true, (*backend)->name());
          return py::make_tuple(false, std::string(backend.status().message()));
        },
        "(True, backend name) when TENSOR_MATCH/GLOBAL_STATE guards can be built, else (False, why).");
}

}  // namespace tjc::bindings
