// Bindings of the runtime: set_eval_frame, GuardedCode, SKIP/RUN_ORIGINAL, Frame, CacheEntry,
// cache_entries, set_guard_complete_hook, reset, stats.
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "common/live_objects.h"
#include "common/runtime_state.h"
#include "common/status.h"
#include "cpython/frame.h"
#include "runtime/cache_entry.h"
#include "runtime/cache_owner.h"
#include "runtime/extra_state.h"
#include "runtime/frame_handle.h"
#include "runtime/guard_complete_hook.h"
#include "runtime/guarded_code.h"
#include "runtime/thread_state.h"

namespace tjc::bindings {
namespace {

cpython::Frame* live_frame(const FrameHandle& handle) {
  if (!handle.valid()) {
    throw std::runtime_error("this frame is gone: a Frame is valid only while the eval-frame callback runs");
  }
  return handle.frame();
}

// The code object behind a function, method, code object or anything with __code__.
py::object code_of(py::handle obj) {
  if (PyCode_Check(obj.ptr())) return py::reinterpret_borrow<py::object>(obj);
  if (PyMethod_Check(obj.ptr())) return code_of(PyMethod_GET_FUNCTION(obj.ptr()));
  if (py::hasattr(obj, "__code__")) {
    py::object code = obj.attr("__code__");
    if (PyCode_Check(code.ptr())) return code;
  }
  throw py::type_error(std::string("expected a function, method or code object, got ") + Py_TYPE(obj.ptr())->tp_name);
}

PyCodeObject* as_code(const py::object& code) { return reinterpret_cast<PyCodeObject*>(code.ptr()); }

// A FrameView over a live Frame handle, or over a mapping (+ optional globals dict).
FrameView view_of(py::handle frame_or_mapping, py::handle globals) {
  if (py::isinstance<FrameHandle>(frame_or_mapping)) {
    return cpython::frame_view(live_frame(frame_or_mapping.cast<const FrameHandle&>()));
  }
  if (!PyDict_Check(frame_or_mapping.ptr())) {
    throw py::type_error(std::string("expected a Frame or a dict of locals, got ") +
                         Py_TYPE(frame_or_mapping.ptr())->tp_name);
  }
  FrameView view;
  view.mapping = frame_or_mapping.ptr();
  if (!globals.is_none()) {
    if (!PyDict_Check(globals.ptr())) throw py::type_error("globals must be a dict or None");
    view.globals = globals.ptr();
  }
  return view;
}

// The owner named by a cache_entries()/frame_action() argument: a CacheOwner, or anything that
// carries one (a callback, a CompiledFunction); None gives `fallback`.
const CacheOwner* owner_arg(py::handle owner, const CacheOwner* fallback) {
  if (owner.is_none()) return fallback;
  if (py::isinstance<CacheOwner>(owner)) return owner.cast<CacheOwner*>();
  py::object holder;
  if (CacheOwner* carried = owner_of_callback(owner, &holder)) return carried;
  if (py::hasattr(owner, "_torch_jit_cache_callback")) {
    if (CacheOwner* carried = owner_of_callback(owner.attr("_torch_jit_cache_callback"), &holder)) return carried;
  }
  throw py::type_error(std::string("owner must be a CacheOwner, a callback or compiled object carrying one, or None; got ") +
                       Py_TYPE(owner.ptr())->tp_name);
}

void reset_all() {
  // all_codes() holds a reference to every code, so clearing one cache cannot free another's
  // ExtraState under this loop.
  for (const py::object& code : ExtraState::all_codes()) {
    if (ExtraState* extra = ExtraState::get(as_code(code))) extra->clear("reset() was called");
  }
  clear_guard_complete_hook();
}

py::dict stats_dict() {
  const RuntimeStats& s = runtime_state().stats;
  py::dict d;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["compiles"] = s.compiles;
  d["evictions"] = s.evictions;
  d["fallbacks"] = s.fallbacks;
  d["skips"] = s.skips;
  d["cache_limit_hits"] = s.cache_limit_hits;
  d["compile_waits"] = s.compile_waits;
  d["forced_misses"] = s.forced_misses;
  return d;
}

}  // namespace

CacheOwner* owner_of_callback(py::handle callback, py::object* owner_object) {
  PyObject* attr = PyObject_GetAttrString(callback.ptr(), "cache_owner");  // new ref
  if (attr == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  py::object held = py::reinterpret_steal<py::object>(attr);
  if (!py::isinstance<CacheOwner>(held)) return nullptr;
  CacheOwner* owner = held.cast<CacheOwner*>();
  *owner_object = std::move(held);
  return owner;
}

void init_runtime(py::module_& m) {
  py::class_<CacheOwner, std::shared_ptr<CacheOwner>>(
      m, "CacheOwner",
      "Whose cache entries these are: one per compile() call. A callback that carries one in its "
      "`cache_owner` attribute makes and looks up only that owner's entries, frame actions and cache "
      "limits; when the owner dies its entries are evicted. Callbacks without one share a single owner.")
      .def(py::init([](int cache_limit) {
             if (cache_limit < 0) throw py::value_error("cache_limit must be >= 1 (or 0 for the default)");
             return std::make_shared<CacheOwner>(cache_limit);
           }),
           py::arg("cache_limit") = 0)
      .def_property_readonly("id", &CacheOwner::id)
      .def_property_readonly("cache_limit", &CacheOwner::cache_limit)
      .def_property_readonly(
          "effective_cache_limit", [](const CacheOwner& o) { return resolve_cache_limit(o.cache_limit()); },
          "This owner's cache limit, else the process-wide config.cache_limit (a code's own limit aside).")
      .def("__repr__", [](const CacheOwner& o) { return "<CacheOwner " + std::to_string(o.id()) + ">"; });

  py::enum_<CallbackAction>(m, "CallbackAction", "What an eval-frame callback may return besides GuardedCode.")
      .value("SKIP", CallbackAction::kSkip, "never intercept this code again; run it uncompiled")
      .value("RUN_ORIGINAL", CallbackAction::kRunOriginal, "run this call uncompiled; ask again next time")
      .value("SKIP_TREE_IF_QUIET", CallbackAction::kSkipTreeIfQuiet,
             "as SKIP; once two runs of the code compiled nothing and hit no entry, the frames it calls are not "
             "intercepted either");
  m.attr("SKIP") = CallbackAction::kSkip;
  m.attr("RUN_ORIGINAL") = CallbackAction::kRunOriginal;
  m.attr("SKIP_TREE_IF_QUIET") = CallbackAction::kSkipTreeIfQuiet;

  py::class_<GuardedCode>(m, "GuardedCode", "Transformed code and the guards under which it may run.")
      .def(py::init([](py::object code, py::object guards) {
             if (!PyCode_Check(code.ptr())) {
               throw py::type_error(std::string("GuardedCode: code must be a code object, got ") +
                                    Py_TYPE(code.ptr())->tp_name);
             }
             if (!py::isinstance<RootGuardManager>(guards)) {
               throw py::type_error(std::string("GuardedCode: guards must be a root GuardManager "
                                                "(runtime.GuardManager()), got ") +
                                    Py_TYPE(guards.ptr())->tp_name);
             }
             GuardedCode guarded{code, guards.cast<std::shared_ptr<RootGuardManager>>()};
             // Inside a callback the original is known: refuse incompatible code now, not later.
             if (cpython::Frame* frame = thread_state().miss_frame) {
               throw_if_error(cpython::check_shadow_compatible(cpython::frame_code(frame), as_code(code)));
             }
             return guarded;
           }),
           py::arg("code"), py::arg("guards"))
      .def_property_readonly("code", [](const GuardedCode& g) { return g.code; })
      .def_property_readonly("guards", [](const GuardedCode& g) { return g.guards; });

  py::class_<FrameHandle, std::shared_ptr<FrameHandle>>(
      m, "Frame", "A frame that has not started, as the eval-frame callback sees it (valid during the callback).")
      .def_property_readonly("f_code",
                             [](const FrameHandle& h) {
                               return py::reinterpret_borrow<py::object>(
                                   reinterpret_cast<PyObject*>(cpython::frame_code(live_frame(h))));
                             })
      .def_property_readonly(
          "f_globals", [](const FrameHandle& h) { return py::reinterpret_borrow<py::object>(cpython::frame_globals(live_frame(h))); })
      .def_property_readonly(
          "f_builtins", [](const FrameHandle& h) { return py::reinterpret_borrow<py::object>(cpython::frame_builtins(live_frame(h))); })
      .def_property_readonly("f_func",
                             [](const FrameHandle& h) {
                               PyObject* func = cpython::frame_function(live_frame(h));
                               return func ? py::reinterpret_borrow<py::object>(func) : py::none();
                             })
      .def_property_readonly("closure",
                             [](const FrameHandle& h) {
                               PyObject* closure = cpython::frame_closure(live_frame(h));
                               return closure ? py::reinterpret_borrow<py::object>(closure) : py::none();
                             })
      .def_property_readonly("f_locals",
                             [](FrameHandle& h) {
                               cpython::Frame* frame = live_frame(h);
                               if (!h.f_locals_cache()) {
                                 PyObject* dict = cpython::frame_locals_dict(frame);
                                 if (dict == nullptr) throw py::error_already_set();
                                 h.f_locals_cache() = py::reinterpret_steal<py::object>(dict);
                               }
                               return h.f_locals_cache();
                             })
      .def_property_readonly("f_back",
                             [](const FrameHandle& h) {
                               live_frame(h);
                               return h.f_back();
                             })
      .def_property_readonly("valid", &FrameHandle::valid)
      .def("_copy_free_vars_for_test",
           [](const FrameHandle& h) { cpython::copy_free_vars_like_fast_to_locals(live_frame(h)); },
           "Test support: do what FastToLocals does to a frame that has not started (fill the free-variable "
           "slots, mark COPY_FREE_VARS as run).")
      .def("__repr__", [](const FrameHandle& h) {
        if (!h.valid()) return std::string("<Frame (gone)>");
        PyCodeObject* code = cpython::frame_code(h.frame());
        return "<Frame of " + std::string(PyUnicode_AsUTF8(code->co_qualname)) + ">";
      });

  py::class_<CacheEntry, std::shared_ptr<CacheEntry>>(
      m, "CacheEntry", "One cached, guarded version of a code object. Shares ownership of the C++ entry.")
      .def_property_readonly("code", [](const CacheEntry& e) { return e.evicted() ? py::object(py::none()) : e.code_object(); })
      .def_property_readonly("guards",
                             [](const CacheEntry& e) -> py::object {
                               if (e.evicted() || !e.guards()) return py::none();
                               return py::str(e.guards()->debug_string());
                             })
      .def_property_readonly("guard_manager",
                             [](const CacheEntry& e) -> py::object {
                               if (e.evicted() || !e.guards()) return py::none();
                               return py::cast(e.guards());
                             })
      .def_property_readonly("hits", &CacheEntry::hits)
      .def_property_readonly("evicted", &CacheEntry::evicted)
      .def_property_readonly("eviction_reason",
                             [](const CacheEntry& e) -> py::object {
                               return e.evicted() ? py::object(py::str(e.eviction_reason())) : py::none();
                             })
      .def(
          "explain",
          [](CacheEntry& e, py::handle frame_or_mapping, py::handle globals) -> py::object {
            if (e.evicted()) return py::str("entry was evicted: " + e.eviction_reason());
            std::optional<std::string> reason = e.explain(view_of(frame_or_mapping, globals));
            if (PyErr_Occurred()) throw py::error_already_set();
            return reason ? py::object(py::str(*reason)) : py::none();
          },
          py::arg("frame_or_mapping"), py::arg("globals") = py::none(),
          "The first failing guard of this entry for a frame (inside a callback) or a mapping, in words; None "
          "when every guard passes.")
      .def("__repr__", [](const CacheEntry& e) {
        if (e.evicted()) return "<CacheEntry evicted: " + e.eviction_reason() + ">";
        return "<CacheEntry of " + std::string(PyUnicode_AsUTF8(e.code()->co_qualname)) +
               ", hits=" + std::to_string(e.hits()) + ">";
      });

  m.def("set_eval_frame",
        [](py::handle callback) {
          py::object owner_object;
          CacheOwner* owner = callback.is_none() ? nullptr : owner_of_callback(callback, &owner_object);
          return set_eval_frame(callback, owner_object, owner);
        },
        py::arg("callback"),
        "Sets this thread's callback (None disables) and returns the previous one. The callback's "
        "`cache_owner` attribute, when it is a CacheOwner, names whose entries it makes.");
  m.def("cache_entries",
        [](py::handle fn_or_code, py::handle owner) {
          py::object code = code_of(fn_or_code);
          std::vector<std::shared_ptr<CacheEntry>> entries;
          if (ExtraState* extra = ExtraState::get(as_code(code))) {
            const CacheOwner* of = owner_arg(owner, nullptr);
            entries = of != nullptr ? extra->entries(of->id()) : extra->entries();
          }
          return entries;
        },
        py::arg("fn_or_code"), py::arg("owner") = py::none(),
        "The live cache entries of a function or code object, in lookup order: every owner's, or only "
        "those of `owner` (a CacheOwner, or a callback or compiled object that carries one).");
  m.def("frame_action",
        [](py::handle fn_or_code, py::handle owner) {
          ExtraState* extra = ExtraState::get(as_code(code_of(fn_or_code)));
          const CacheOwner* of = owner_arg(owner, &CacheOwner::shared());
          return std::string(frame_action_name(extra ? extra->action(of->id()) : FrameAction::kDefault));
        },
        py::arg("fn_or_code"), py::arg("owner") = py::none(),
        "'default', 'skip', 'run-only', 'skip-watch' or 'skip-tree' for `owner` (default: the shared owner "
        "of plain callbacks); 'skip' for every owner once set_skip() was called.");
  m.def("set_skip",
        [](py::handle fn_or_code) {
          py::object code = code_of(fn_or_code);
          ExtraState* extra = ExtraState::get_or_create(as_code(code));
          if (extra == nullptr) throw py::error_already_set();
          extra->disable();
        },
        py::arg("fn_or_code"), "Never intercept this code, even after reset() (its cached entries stay but are not used).");
  m.def("set_cache_limit",
        [](py::handle fn_or_code, int limit) {
          if (limit < 0) throw py::value_error("cache_limit must be >= 1 (or 0 for the process-wide limit)");
          ExtraState* extra = ExtraState::get_or_create(as_code(code_of(fn_or_code)));
          if (extra == nullptr) throw py::error_already_set();
          extra->set_cache_limit(limit);
        },
        py::arg("fn_or_code"), py::arg("limit"),
        "This code's own cache limit (0: use config.cache_limit).");
  m.def("set_guard_complete_hook", &set_guard_complete_hook, py::arg("hook"),
        "Sets the process-wide guard-complete hook, hook(hit: bool) -> bool, asked after each lookup of a code "
        "that has entries (False turns a hit into a miss); None clears it. Returns the previous hook (or None).");
  // The hook is released before the interpreter tears down, so its __del__ (and whatever it holds,
  // a process group) runs while Python still can.
  py::module_::import("atexit").attr("register")(py::cpp_function([]() { clear_guard_complete_hook(); }));
  m.def("reset", &reset_all,
        "Drops every cache, resets every code's action and clears the guard-complete hook. Safe while compiled "
        "frames run.");
  m.def("stats", &stats_dict,
        "Counters: hits, misses, compiles, evictions, fallbacks, skips, cache_limit_hits, compile_waits, forced_misses.");
  m.def("_live_objects", []() {
    const LiveObjects& live = live_objects();
    py::dict d;
    d["extra_states"] = live.extra_states;
    d["cache_entries"] = live.cache_entries;
    d["guard_managers"] = live.guard_managers;
    return d;
  }, "Live C++ objects: extra_states, cache_entries, guard_managers (tree nodes).");
  m.def("reset_stats", []() { runtime_state().stats = RuntimeStats(); });
  m.def("hook_installed", &hook_installed, "Whether the eval-frame hook is installed in the interpreter now.");
  m.attr("DEFAULT_CACHE_LIMIT") = kDefaultCacheLimit;
  m.def("_set_cache_limit", [](int limit) {
    if (limit < 1) throw py::value_error("cache_limit must be >= 1");
    runtime_state().cache_limit = limit;
  });
  m.def("_cache_limit", []() { return runtime_state().cache_limit; });
  m.def("_set_force_eager", [](bool on) { runtime_state().force_eager = on; },
        "set_stance('force_eager') (frontend/stance.py): compiled calls run their function uncompiled.");
  m.def("_force_eager", []() { return runtime_state().force_eager; });
  m.def("_set_testing_copy_free_vars_on_entry", [](bool on) { runtime_state().testing_copy_free_vars_on_entry = on; },
        "Test support: make the hook fill every intercepted frame's free-variable slots first, as "
        "FastToLocals would.");
}

}  // namespace tjc::bindings
