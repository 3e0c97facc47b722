// rnncore._core: the Python extension. A thin layer over the public C++ API (rnncore.hpp and the io
// library): arrays in, arrays out, the library's status and detail line raised as exceptions. It
// does not link PyTorch: rnncore/torch.py builds the custom ops on top of it, and their runs
// (Net.tensor_forward / tensor_backward) read and make torch tensors through libtorch's stable C
// ABI, found at run time (torch_abi.hpp), or else through their Python attributes and torch.empty,
// so that one call per run does the weights' check, the import and the run without NumPy between.
//
// A Net holds a stack, its canonical weights, the packed weights of one plan and a workspace. Each
// call plans for its own batch and length (Plan::create allocates nothing and is cheap; the packed
// layout does not depend on either, so the weights are packed once) and runs without the GIL, under
// the Net's mutex, straight on the caller's arrays when they are dense and of the Net's dtype.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "rnncore/gpu.hpp"
#include "rnncore/io/export_c.hpp"
#include "rnncore/io/int8_file.hpp"
#include "rnncore/io/model.hpp"
#include "rnncore/io/quantize.hpp"
#include "rnncore/io/stack_config.hpp"
#include "rnncore/rnncore.hpp"
#include "torch_abi.hpp"

namespace py = pybind11;
using namespace rnncore;

namespace {

// ---- errors: the status and the library's one-line detail ----

struct StatusError {
  Status status;
  std::string message;
  bool argument = false;  // an option that does not fit the model or data (ArgumentError whatever the status)
};

PyObject* g_error = nullptr;           // rnncore.Error(RuntimeError)
PyObject* g_argument_error = nullptr;  // rnncore.ArgumentError(Error, ValueError)

// Statuses that say an argument was wrong (ValueError); the others are failures to run (RuntimeError).
bool is_argument_status(Status s) {
  switch (s) {
    case Status::unsupported:
    case Status::weights_not_packed:
    case Status::backend_unavailable:
    case Status::io:
    case Status::format:
    case Status::out_of_memory:
    case Status::internal:
    case Status::device: return false;
    default: return true;
  }
}

[[noreturn]] void fail(Status s, const std::string& detail) {
  throw StatusError{s, std::string(status_message(s)) + ": " + detail};
}
[[noreturn]] void bad_argument(const std::string& detail) { fail(Status::invalid_size, detail); }
void check(Status s) {
  if (s != Status::ok) fail(s, last_error_detail());
}

// ---- buffers ----

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<unsigned char, AlignedFree>;

Buffer aligned_buffer(std::size_t bytes) {
  const std::size_t n = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, n == 0 ? kAlignment : n);
  if (p == nullptr) fail(Status::out_of_memory, "could not allocate " + std::to_string(bytes) + " bytes");
  return Buffer(static_cast<unsigned char*>(p));
}

py::dtype numpy_dtype(DType t) { return t == DType::f64 ? py::dtype::of<double>() : py::dtype::of<float>(); }

std::string shape_string(const std::vector<py::ssize_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
std::string shape_string(const py::array& a) {
  return shape_string(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
}

// A dense array of `dtype` viewing `obj` when it already is one (no copy), else a converted copy.
// Floating-point inputs only: integers or objects are refused rather than silently converted.
py::array dense(const py::handle& obj, DType dtype, const char* name) {
  py::array a = py::array::ensure(obj);
  if (!a) bad_argument(std::string(name) + ": not an array");
  if (a.dtype().kind() != 'f') bad_argument(std::string(name) + ": dtype " + std::string(py::str(a.dtype())) +
                                            ", expected a floating-point array");
  const py::dtype want = numpy_dtype(dtype);
  if (a.dtype().is(want) || a.dtype().equal(want)) {
    if (a.flags() & py::array::c_style) return a;
  }
  return py::array::ensure(a.attr("astype")(want, py::arg("order") = "C"));
}

std::vector<py::ssize_t> dims(const py::array& a) { return std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()); }

// A dense, C-contiguous block of the net's dtype that a run reads (an array's or a tensor's memory), and
// the object that keeps that memory alive.
struct Block {
  const void* data = nullptr;  // null: none given
  std::vector<py::ssize_t> shape;
  py::object owner;
};

Block array_block(py::array a) {
  Block b;
  b.data = a.data();
  b.shape = dims(a);
  b.owner = std::move(a);
  return b;
}

// ---- torch tensors (rnncore.torch): read and made through libtorch's stable C ABI when rnncore.torch
// found it (torch_abi.hpp), else through their Python attributes and torch.empty, so that its runs
// take and return tensors without NumPy and without linking libtorch ----

// torch's functions and dtypes, the keyword arguments torch.empty gets for each dtype, and attribute
// names made once (a name made from a C string at each access costs more than the access).
struct Torch {
  py::object empty, float32, float64, uint8;
  py::dict kw_f32, kw_f64, kw_u8;
  py::str is_cpu, dtype, is_contiguous, contiguous, shape, data_ptr, version, device;
};

const Torch& torch_api() {  // rnncore.torch has imported torch before its first run
  static const Torch* t = [] {
    py::module_ m = py::module_::import("torch");
    auto* p = new Torch;  // for good
    p->empty = m.attr("empty"), p->float32 = m.attr("float32"), p->float64 = m.attr("float64");
    p->uint8 = m.attr("uint8");
    p->kw_f32["dtype"] = p->float32;
    p->kw_f64["dtype"] = p->float64;
    p->kw_u8["dtype"] = p->uint8;
    p->is_cpu = "is_cpu", p->dtype = "dtype", p->is_contiguous = "is_contiguous", p->contiguous = "contiguous";
    p->shape = "shape", p->data_ptr = "data_ptr", p->version = "_version", p->device = "device";
    return p;
  }();
  return *t;
}

const py::object& torch_dtype(DType t) { return t == DType::f64 ? torch_api().float64 : torch_api().float32; }

void* tensor_data(const py::handle& t) {
  rnncore_py::TensorFacts f;
  if (rnncore_py::abi_tensor_facts(t.ptr(), &f)) return f.data;
  return reinterpret_cast<void*>(t.attr(torch_api().data_ptr)().cast<std::uintptr_t>());
}

rnncore_py::AbiDType abi_dtype(DType t) {
  return t == DType::f64 ? rnncore_py::AbiDType::f64 : rnncore_py::AbiDType::f32;
}

std::size_t tensor_bytes(const std::vector<py::ssize_t>& shape, DType dtype) {
  std::size_t n = dtype == DType::f64 ? 8 : 4;
  for (py::ssize_t d : shape) n *= static_cast<std::size_t>(d > 0 ? d : 0);
  return n;
}

// A new tensor's memory of `bytes`, before anything touches it: on Linux, its whole 2 MiB pages
// are advised transparent huge pages. torch.empty's large blocks are fresh mappings (glibc mmaps
// them), so a training step of 4 KiB pages faulted in its reserve, outputs and gradients anew each
// call: an LSTM at H 512, B 64, T 50 took 19,500 page faults and 28 ms of system time a step (143
// ms, 114 ms in `rnncore bench`); with the advice 116 ms, as PyTorch's own THP_MEM_ALLOC_ENABLE=1
// gives. No effect where THP is off ("never") or memory comes back from the heap already touched.
void advise_huge_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;
  const auto begin = reinterpret_cast<std::uintptr_t>(data), end = begin + bytes;
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), last = end & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // advice: failure is harmless
#else
  (void)data;
  (void)bytes;
#endif
}

// A new tensor (uninitialised, as torch.empty(*shape, dtype=)), and its memory.
py::object new_tensor(const std::vector<py::ssize_t>& shape, DType dtype, void** data) {
  if (rnncore_py::torch_abi_on()) {
    std::int64_t dims[rnncore_py::kMaxDims];
    for (std::size_t i = 0; i < shape.size() && i < rnncore_py::kMaxDims; ++i) dims[i] = shape[i];
    PyObject* t = rnncore_py::abi_new_tensor(dims, static_cast<int>(shape.size()), abi_dtype(dtype), data);
    if (t != nullptr) {
      advise_huge_pages(*data, tensor_bytes(shape, dtype));
      return py::reinterpret_steal<py::object>(t);
    }
  }
  const Torch& api = torch_api();
  py::tuple dims(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) dims[i] = py::int_(shape[i]);
  PyObject* t = PyObject_Call(api.empty.ptr(), dims.ptr(), (dtype == DType::f64 ? api.kw_f64 : api.kw_f32).ptr());
  if (t == nullptr) throw py::error_already_set();
  py::object out = py::reinterpret_steal<py::object>(t);
  *data = tensor_data(out);
  advise_huge_pages(*data, tensor_bytes(shape, dtype));
  return out;
}

// A CPU tensor of `dtype` as a block on its memory (on a contiguous copy when it is not contiguous).
Block tensor_block(const py::handle& t, DType dtype, const char* name) {
  rnncore_py::TensorFacts f;
  if (rnncore_py::abi_tensor_facts(t.ptr(), &f) && f.cpu && f.contiguous &&
      f.dtype_is[static_cast<int>(abi_dtype(dtype))]) {
    Block b;
    b.owner = py::reinterpret_borrow<py::object>(t);
    b.shape.assign(f.sizes, f.sizes + f.ndim);
    b.data = f.data;
    return b;
  }
  // Else (and for the errors' words) through the tensor's Python attributes.
  const Torch& api = torch_api();
  if (!t.attr(api.is_cpu).cast<bool>())
    bad_argument(std::string(name) + ": a tensor on " + std::string(py::str(t.attr(api.device))) +
                 "; rnncore.torch runs on the CPU");
  const py::object dt = t.attr(api.dtype);
  if (!dt.is(torch_dtype(dtype)))
    fail(Status::tensor_dtype, std::string(name) + ": dtype " + std::string(py::str(dt)) + ", expected " +
                                   std::string(py::str(torch_dtype(dtype))) + " (the module's dtype)");
  Block b;
  b.owner = t.attr(api.is_contiguous)().cast<bool>() ? py::reinterpret_borrow<py::object>(t)
                                                      : t.attr(api.contiguous)();
  const py::tuple shape = b.owner.attr(api.shape);
  b.shape.resize(shape.size());
  for (std::size_t i = 0; i < b.shape.size(); ++i) b.shape[i] = PyLong_AsSsize_t(shape[i].ptr());
  b.data = tensor_data(b.owner);
  return b;
}

// A new uint8 tensor of n bytes (uninitialised, as torch.empty(n, dtype=torch.uint8)), and its memory.
py::object new_bytes(std::size_t n, void** data) {
  const std::int64_t size = static_cast<std::int64_t>(n);
  if (PyObject* t = rnncore_py::abi_new_tensor(&size, 1, rnncore_py::AbiDType::u8, data)) {
    advise_huge_pages(*data, n);
    return py::reinterpret_steal<py::object>(t);
  }
  const Torch& api = torch_api();
  py::object out = api.empty(static_cast<py::ssize_t>(n), **api.kw_u8);
  *data = tensor_data(out);
  advise_huge_pages(*data, n);
  return out;
}

// Whether `reserve` is a contiguous uint8 tensor of at least `bytes` elements.
bool reserve_fits(const py::handle& reserve, std::size_t bytes) {
  rnncore_py::TensorFacts f;
  if (rnncore_py::abi_tensor_facts(reserve.ptr(), &f)) {
    std::int64_t n = 1;
    for (int i = 0; i < f.ndim; ++i) n *= f.sizes[i];
    return f.dtype_is[static_cast<int>(rnncore_py::AbiDType::u8)] && f.contiguous &&
           static_cast<std::size_t>(n) >= bytes;
  }
  return py::object(reserve.attr("dtype")).is(torch_api().uint8) && reserve.attr("is_contiguous")().cast<bool>() &&
         reserve.attr("numel")().cast<std::size_t>() >= bytes;
}

// Per-row lengths as int32 (copied; any integer dtype), each checked to fit.
std::vector<std::int32_t> lengths_of(const py::handle& obj, int batch) {
  py::array a = py::array::ensure(obj);
  if (!a || (a.dtype().kind() != 'i' && a.dtype().kind() != 'u'))
    bad_argument("lengths: expected an integer array of shape [" + std::to_string(batch) + "]");
  if (a.ndim() != 1 || a.shape(0) != batch)
    bad_argument("lengths: shape " + shape_string(a) + ", expected [" + std::to_string(batch) + "]");
  py::array_t<std::int64_t> v = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  std::vector<std::int32_t> out(static_cast<std::size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    const std::int64_t n = v.at(b);
    if (n < 0 || n > INT32_MAX) fail(Status::bad_length, "lengths[" + std::to_string(b) + "] = " + std::to_string(n));
    out[static_cast<std::size_t>(b)] = static_cast<std::int32_t>(n);
  }
  return out;
}

// Per-step state resets ([T, B] time-major, [B, T] batch-major; any integer or bool dtype): 1 where
// the value is nonzero (ForwardArgs::resets).
std::vector<std::uint8_t> resets_of(const py::handle& obj, int seq_len, int batch, bool batch_first) {
  const std::string want = batch_first ? "[" + std::to_string(batch) + ", " + std::to_string(seq_len) + "]"
                                       : "[" + std::to_string(seq_len) + ", " + std::to_string(batch) + "]";
  py::array a = py::array::ensure(obj);
  if (!a || (a.dtype().kind() != 'i' && a.dtype().kind() != 'u' && a.dtype().kind() != 'b'))
    bad_argument("resets: expected an integer or bool array of shape " + want);
  const py::ssize_t rows = batch_first ? batch : seq_len, cols = batch_first ? seq_len : batch;
  if (a.ndim() != 2 || a.shape(0) != rows || a.shape(1) != cols)
    bad_argument("resets: shape " + shape_string(a) + ", expected " + want);
  py::array_t<std::int64_t> v = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * cols));
  const std::int64_t* d = v.data();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = d[i] != 0 ? 1 : 0;
  return out;
}

// ---- names of enums ----

Mode parse_mode_arg(const std::string& s) {
  Mode m;
  if (s == "rnn_tanh" || s == "tanh") return Mode::rnn_tanh;
  if (s == "rnn_relu" || s == "relu") return Mode::rnn_relu;
  if (!io::parse_mode(s, &m)) fail(Status::invalid_enum, "mode '" + s + "': expected lstm, gru, rnn_tanh or rnn_relu");
  return m;
}

Backend parse_backend(const std::string& s) {
  if (s == "auto") return Backend::auto_select;
  if (s == "reference") return Backend::reference;
  if (s == "simd") return Backend::simd;
  if (s == "gpu") return Backend::gpu;
  fail(Status::invalid_enum, "backend '" + s + "': expected auto, reference, simd or gpu");
}

DType parse_dtype(const std::string& s) {
  if (s == "float32" || s == "f32") return DType::f32;
  if (s == "float64" || s == "f64") return DType::f64;
  fail(Status::invalid_enum, "dtype '" + s + "': expected float32 or float64");
}

// The packed weights' storage (PlanOptions::weight_dtype): f32, or bf16 / f16 on the SIMD backend
// (docs/training.md: products in f32 from the rounded weights; the gradients stay f32).
DType parse_weight_dtype(const std::string& s) {
  if (s == "f32" || s == "float32") return DType::f32;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "f16" || s == "float16") return DType::f16;
  fail(Status::invalid_enum, "weight_dtype '" + s + "': expected f32, bf16 or f16");
}

RunMode parse_run_mode(const std::string& s) {
  if (s == "inference") return RunMode::inference;
  if (s == "training") return RunMode::training;
  if (s == "monte_carlo") return RunMode::monte_carlo;
  fail(Status::invalid_enum, "run mode '" + s + "': expected inference, training or monte_carlo");
}

// ---- the network ----

// What a run reads besides the weights, checked against the stack and converted.
struct RunInputs {
  Block x;
  Block h0, c0;  // data null: none
  std::vector<std::int32_t> lengths;
  std::vector<std::uint32_t> row_ids;
  std::vector<std::uint8_t> resets;  // empty: none
  int batch = 0, seq_len = 0;
  bool batch_first = false;
  RunMode mode = RunMode::inference;
  std::uint64_t seed = 0, step = 0;
  std::uint32_t time_offset = 0;
};

class Net {
 public:
  Net(const StackSpec& stack, WeightFormat format, std::string prefix, const PlanOptions& options)
      : stack_(stack), format_(format), prefix_(std::move(prefix)), options_(options) {
    check(validate(stack_));
    if (options_.threads > 1) {
      check(ThreadPool::create(options_.threads, &pool_));
      options_.thread_pool = pool_;
    }
    Plan probe;
    check(plan_for(1, 1, &probe));
    kernel_ = probe.kernel_name();
    backend_ = to_string(probe.backend());
    canonical_.assign(static_cast<std::size_t>(param_count(stack_)) * dtype_size(stack_.dtype), 0);
    infos_.resize(static_cast<std::size_t>(format_tensor_count(stack_, format_)));
    for (std::size_t i = 0; i < infos_.size(); ++i)
      check(format_tensor_info(stack_, format_, static_cast<int>(i), prefix_.c_str(), &infos_[i]));
  }
  ~Net() { ThreadPool::destroy(pool_); }
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  const StackSpec& stack() const { return stack_; }
  WeightFormat format() const { return format_; }
  const std::string& prefix() const { return prefix_; }
  bool training() const { return options_.training; }
  int threads() const { return options_.threads; }
  DType weight_dtype() const { return options_.weight_dtype; }
  const std::string& kernel() const { return kernel_; }
  const std::string& backend() const { return backend_; }
  std::vector<std::string> notes, ignored, ends;  // what io::load_weights reported

  Status make_plan(int batch, int seq_len, Plan* out) const {
    PlanOptions o = options_;
    o.max_batch = batch;
    o.max_seq_len = seq_len;
    return Plan::create(stack_, o, out);
  }

  // A plan for `batch` rows and `seq_len` steps: a copy of the last one made when those match (the
  // options never change; a 16 KiB copy costs a fifth of Plan::create, and is the caller's own while
  // the run goes on without the GIL). Called with the GIL held, which guards the cache.
  Status plan_for(int batch, int seq_len, Plan* out) const {
    batch = batch < 1 ? 1 : batch;
    seq_len = seq_len < 1 ? 1 : seq_len;
    if (batch == planned_batch_ && seq_len == planned_seq_len_) {
      *out = planned_;
      return Status::ok;
    }
    const Status s = make_plan(batch, seq_len, out);
    if (s == Status::ok) {
      planned_ = *out;
      planned_batch_ = batch;
      planned_seq_len_ = seq_len;
    }
    return s;
  }

  std::size_t reserve_bytes(int batch, int seq_len) const {
    Plan p;
    check(plan_for(batch, seq_len, &p));
    return p.reserve_bytes();
  }

  // The format's tensors: (name, shape, optional).
  py::list tensors() const {
    py::list out;
    for (int i = 0; i < format_tensor_count(stack_, format_); ++i) {
      TensorInfo info;
      check(format_tensor_info(stack_, format_, i, prefix_.c_str(), &info));
      out.append(py::make_tuple(std::string(info.name), shape_tuple(info.shape), info.optional));
    }
    return out;
  }

  py::array canonical() const {
    py::array out(numpy_dtype(stack_.dtype), std::vector<py::ssize_t>{static_cast<py::ssize_t>(param_count(stack_))});
    std::memcpy(out.mutable_data(), canonical_.data(), canonical_.size());
    return out;
  }

  void set_canonical(const py::handle& values) {
    py::array a = dense(values, stack_.dtype, "canonical weights");
    if (a.size() != param_count(stack_))
      bad_argument("canonical weights: " + std::to_string(a.size()) + " elements, expected " +
                   std::to_string(param_count(stack_)));
    std::lock_guard<std::mutex> lock(mu_);
    std::memcpy(canonical_.data(), a.data(), canonical_.size());
    packed_ok_ = false;
    forget_tensors();
  }

  // Imports the format's tensors, given in tensors() order (None for an absent optional tensor).
  void set_weights(const py::sequence& values) {
    const std::size_t n = infos_.size();
    if (py::len(values) != n)
      bad_argument("weights: " + std::to_string(py::len(values)) + " tensors, expected " + std::to_string(n));
    std::vector<Block> blocks;
    std::vector<int> index;
    for (std::size_t i = 0; i < n; ++i) {
      if (values[i].is_none()) continue;
      blocks.push_back(array_block(dense(values[i], stack_.dtype, infos_[i].name)));
      index.push_back(static_cast<int>(i));
    }
    import_blocks(blocks, index);
    forget_tensors();
  }

  // rnncore.torch's weights before a run: imports the module's tensors (tensors() order, without the
  // optional ones when fewer are given), which the next run packs, unless this net holds them already.
  // by_version compares each tensor's (data_ptr, version counter) with the last import's: 1 us for
  // four tensors, right for whatever goes through autograd's view of a tensor (optimizers,
  // load_state_dict, nn.init, in-place writes under torch.no_grad), blind to writes that bypass the
  // counters. Else their shapes, then bytes with a copy of the last import's (memcmp: well under a
  // microsecond for a 1-unit LSTM, about 0.1 ms for an H=256 layer, against milliseconds to pack),
  // so that writes through `.data`, NumPy views or gradcheck's perturbations are seen too.
  void take_tensors(const py::sequence& weights, bool by_version) {
    const std::vector<int> index = given_tensors(py::len(weights));
    std::vector<std::pair<std::uintptr_t, long long>> key;
    bool tracked = by_version;
    if (by_version) {
      for (py::handle w : weights) {
        const auto ptr = reinterpret_cast<std::uintptr_t>(tensor_data(w));
        PyObject* v = PyObject_GetAttr(w.ptr(), torch_api().version.ptr());  // raises for inference tensors
        if (v == nullptr) {
          PyErr_Clear();
          tracked = false;
          break;
        }
        key.emplace_back(ptr, PyLong_AsLongLong(v));
        Py_DECREF(v);
      }
      if (tracked && versions_valid_ && key == versions_) return;
    }
    std::vector<Block> blocks;
    for (std::size_t k = 0; k < index.size(); ++k)
      blocks.push_back(tensor_block(weights[k], stack_.dtype, infos_[static_cast<std::size_t>(index[k])].name));
    if (!by_version && same_bytes(blocks)) return;
    if (make_source(index)) {
      gather(blocks, index);
    } else {
      import_blocks(blocks, index);
    }
    forget_tensors();
    if (by_version) {
      versions_valid_ = tracked;
      versions_ = std::move(key);
      for (py::handle w : weights) version_tensors_.push_back(py::reinterpret_borrow<py::object>(w));
      return;
    }
    remember(blocks);
  }

  std::size_t imports() const { return imports_; }

  // The format's tensors from canonical values (the weights, or their gradients with `gradient`).
  py::list export_tensors(const py::handle& canonical, bool gradient) const {
    py::array c = canonical.is_none() ? this->canonical() : dense(canonical, stack_.dtype, "canonical");
    if (c.size() != param_count(stack_)) bad_argument("canonical: " + std::to_string(c.size()) + " elements");
    py::list out;
    for (int i = 0; i < format_tensor_count(stack_, format_); ++i) {
      TensorInfo info;
      check(format_tensor_info(stack_, format_, i, prefix_.c_str(), &info));
      py::array t(numpy_dtype(stack_.dtype), shape_vector(info.shape));
      check(gradient ? export_gradient_tensor(stack_, format_, i, c.data(), t.mutable_data())
                     : export_tensor(stack_, format_, i, c.data(), t.mutable_data()));
      out.append(t);
    }
    return out;
  }

  // The Embedding's and the head's tensors (of `ends`, in its order) from canonical values, in the file's
  // layout: the table [V, I], the head's W [F, D·O] (Keras' kernel: [D·O, F]) and b [F] where the file has one.
  py::list end_tensors(const py::handle& canonical) const {
    py::array c = dense(canonical, stack_.dtype, "canonical");
    if (c.size() != param_count(stack_)) bad_argument("canonical: " + std::to_string(c.size()) + " elements");
    const std::size_t es = dtype_size(stack_.dtype);
    const auto* base = static_cast<const unsigned char*>(c.data());
    py::list out;
    auto slice = [&](ParamKind kind, std::vector<py::ssize_t> shape, bool transpose) {
      py::array t(numpy_dtype(stack_.dtype), shape);
      const unsigned char* src = base + static_cast<std::size_t>(canonical_offset(stack_, 0, 0, kind, 0)) * es;
      auto* dst = static_cast<unsigned char*>(t.mutable_data());
      if (!transpose) {
        std::memcpy(dst, src, static_cast<std::size_t>(t.nbytes()));
      } else {  // canonical [rows, cols] into [cols, rows]
        const std::size_t rows = static_cast<std::size_t>(shape[1]), cols = static_cast<std::size_t>(shape[0]);
        for (std::size_t r = 0; r < rows; ++r)
          for (std::size_t k = 0; k < cols; ++k) std::memcpy(dst + (k * rows + r) * es, src + (r * cols + k) * es, es);
      }
      out.append(t);
    };
    std::size_t n = 0;
    if (stack_.embedding.vocab_size > 0) {
      slice(ParamKind::embedding, {stack_.embedding.vocab_size, stack_.input_size}, false);
      ++n;
    }
    if (stack_.head.out_features > 0) {
      const LayerSpec& last = stack_.layers[stack_.num_layers - 1];
      const py::ssize_t F = stack_.head.out_features, W = num_directions(last) * output_size(last);
      const bool keras = format_ == WeightFormat::keras;
      slice(ParamKind::dense_weight, keras ? std::vector<py::ssize_t>{W, F} : std::vector<py::ssize_t>{F, W}, keras);
      if (ends.size() > n + 1) slice(ParamKind::dense_bias, {F}, false);
    }
    return out;
  }

  RunInputs inputs(const py::handle& x, const py::handle& h0, const py::handle& c0, const py::handle& lengths,
                   const py::handle& row_ids, bool batch_first, const py::handle& resets) const;
  RunInputs tensor_inputs(const py::handle& x, const py::handle& h0, const py::handle& c0, const py::handle& lengths,
                          const py::handle& row_ids, bool batch_first, const py::handle& resets) const;
  py::tuple forward(const RunInputs& in, bool keep_reserve);
  py::tuple backward(const RunInputs& in, const py::handle& reserve, const py::handle& dy, const py::handle& dhy,
                     const py::handle& dcy, bool need_dx);
  py::tuple tensor_forward(const RunInputs& in, bool keep_reserve, bool op_outputs);
  py::tuple tensor_backward(const RunInputs& in, const py::handle& reserve, const py::handle& dy,
                            const py::handle& dhy, const py::handle& dcy, std::size_t weights, bool need_dx,
                            bool need_dw);

  // Shapes of h and c for `batch` rows: [L·D, B, O] and [L·D, B, H] when the layers are alike, else flat.
  std::pair<std::vector<py::ssize_t>, std::vector<py::ssize_t>> state_shapes(int batch) const {
    if (io::uniform_states(stack_)) {
      const py::ssize_t ld = static_cast<py::ssize_t>(stack_.num_layers) * num_directions(stack_.layers[0]);
      return {{ld, batch, output_size(stack_.layers[0])}, {ld, batch, stack_.layers[0].hidden_size}};
    }
    return {{static_cast<py::ssize_t>(state_elements(stack_, batch))},
            {static_cast<py::ssize_t>(cell_state_elements(stack_, batch))}};
  }

  // Width of one row of y: a head's out_features, else D·O of the last layer.
  int output_width() const { return stack_output_size(stack_); }

  // y's shape for a run: [T, B, W] or [B, T, W]; [B, W] when a head maps each row's last step.
  std::vector<py::ssize_t> y_shape(const RunInputs& in) const {
    if (stack_.head.out_features > 0 && stack_.head.last_step_only) return {in.batch, output_width()};
    return in.batch_first ? std::vector<py::ssize_t>{in.batch, in.seq_len, output_width()}
                          : std::vector<py::ssize_t>{in.seq_len, in.batch, output_width()};
  }

 private:
  static py::tuple shape_tuple(const Shape& s) {
    py::tuple t(static_cast<std::size_t>(s.ndim));
    for (int d = 0; d < s.ndim; ++d) t[static_cast<std::size_t>(d)] = s.dims[d];
    return t;
  }
  static std::vector<py::ssize_t> shape_vector(const Shape& s) { return std::vector<py::ssize_t>(s.dims, s.dims + s.ndim); }

  // Packs the canonical weights once after they change. Called under mu_, without the GIL (so not
  // through plan_for's cache).
  void ensure_packed() {
    if (packed_ok_) return;
    Plan p;
    check(make_plan(1, 1, &p));
    if (!packed_ || packed_bytes_ != p.packed_weight_bytes()) {  // else repacked in place: no new pages
      packed_bytes_ = p.packed_weight_bytes();
      packed_ = aligned_buffer(packed_bytes_);
    }
    check(p.pack_weights(canonical_.data(), packed_.get(), packed_bytes_));
    packed_ok_ = true;
  }
  unsigned char* workspace(std::size_t bytes) {  // called under mu_
    if (bytes > workspace_bytes_ || !workspace_) {
      workspace_ = aligned_buffer(bytes);
      workspace_bytes_ = bytes;
    }
    return workspace_.get();
  }
  ForwardArgs forward_args(const RunInputs& in) const;
  void complete(RunInputs& in, bool no_c0, const py::handle& lengths, const py::handle& row_ids,
                const py::handle& resets) const;

  // Which of the format's tensors `count` given tensors are: all, or those that are not optional.
  std::vector<int> given_tensors(std::size_t count) const {
    std::vector<int> index;
    for (std::size_t i = 0; i < infos_.size(); ++i)
      if (count == infos_.size() || !infos_[i].optional) index.push_back(static_cast<int>(i));
    if (index.size() != count)
      bad_argument("weights: " + std::to_string(count) + " tensors, expected " + std::to_string(infos_.size()));
    return index;
  }

  // Imports blocks (the format's tensors `index`, the others absent) as the canonical weights.
  void import_blocks(const std::vector<Block>& blocks, const std::vector<int>& index) {
    std::vector<TensorView> views;
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      const Block& b = blocks[k];
      TensorView v;
      v.name = infos_[static_cast<std::size_t>(index[k])].name;
      v.dtype = stack_.dtype;
      if (b.shape.size() > 4) fail(Status::tensor_shape, std::string(v.name) + ": shape " + shape_string(b.shape));
      v.shape.ndim = static_cast<std::int32_t>(b.shape.size());
      for (std::size_t d = 0; d < b.shape.size(); ++d) v.shape.dims[d] = b.shape[d];
      v.data = b.data;
      views.push_back(v);
    }
    std::vector<unsigned char> canonical(canonical_.size());
    check(import_weights(stack_, format_, views.data(), views.size(), prefix_.c_str(), canonical.data()));
    std::lock_guard<std::mutex> lock(mu_);
    canonical_.swap(canonical);
    packed_ok_ = false;
    ++imports_;
  }

  // rnncore.torch's one-to-one map from the module's tensors to the canonical weights, found once for
  // the tensors `index` by importing their elements' indices (exact in float64) with import_weights,
  // and kept as runs: canonical elements [canonical, canonical + length) are elements [offset, offset +
  // length) of the tensor `tensor` (the k-th of `index`), or zeros (kNoTensor). A gather (a scatter for
  // gradients) of whole runs — for torch.nn's layouts a run is a gate's matrix — instead of
  // import_weights and export_gradient_tensor (each about 30 ms for an H=256 LSTM layer; element by
  // element through a map, 8 ms for an H=512 layer's import and export a step; a transposed kernel's
  // element-wise map is runs of one). False when the format's import is not a one-to-one copy.
  bool make_source(const std::vector<int>& index) {
    if (index == source_index_) return !runs_.empty();
    source_index_ = index;
    runs_.clear();
    std::vector<TensorView> views;
    std::vector<std::size_t> starts;  // tensor k's elements are k's start + [0, its size), from 1
    std::size_t total = 0;
    for (int i : index) {
      starts.push_back(total + 1);
      total += elements(infos_[static_cast<std::size_t>(i)].shape);
    }
    std::vector<double> values(total);
    for (std::size_t k = 0; k < total; ++k) values[k] = static_cast<double>(k + 1);
    for (std::size_t t = 0; t < index.size(); ++t) {
      TensorView v;
      v.name = infos_[static_cast<std::size_t>(index[t])].name;
      v.dtype = DType::f64;
      v.shape = infos_[static_cast<std::size_t>(index[t])].shape;
      v.data = values.data() + (starts[t] - 1);
      views.push_back(v);
    }
    StackSpec f64 = stack_;
    f64.dtype = DType::f64;
    std::vector<double> canonical(static_cast<std::size_t>(param_count(stack_)));
    if (import_weights(f64, format_, views.data(), views.size(), prefix_.c_str(), canonical.data()) != Status::ok)
      return false;
    std::vector<bool> used(total + 1, false);
    std::size_t last = 0;  // the previous element's source (0: none)
    for (std::size_t k = 0; k < canonical.size(); ++k) {
      const double c = canonical[k];
      const bool index_value = c >= 0 && c <= static_cast<double>(total) && c == static_cast<double>(static_cast<std::uint32_t>(c));
      const std::size_t from = index_value ? static_cast<std::size_t>(c) : 0;
      if (!index_value || (from > 0 && used[from])) {  // not a copy, or one element in two places
        runs_.clear();
        return false;
      }
      used[from] = from > 0;
      const std::size_t t = from == 0 ? kNoTensor
                                      : static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), from) -
                                                                 starts.begin()) - 1;
      Run* r = runs_.empty() ? nullptr : &runs_.back();
      if (r != nullptr && r->tensor == t && (t == kNoTensor || from == last + 1)) {
        ++r->length;
      } else {
        runs_.push_back(Run{k, t, t == kNoTensor ? 0 : from - starts[t], 1});
      }
      last = from;
    }
    covers_all_ = std::all_of(used.begin() + 1, used.end(), [](bool u) { return u; });
    return true;
  }

  static std::size_t elements(const Shape& s) {
    std::size_t n = 1;
    for (int d = 0; d < s.ndim; ++d) n *= static_cast<std::size_t>(s.dims[d]);
    return n;
  }

  // Imports the blocks (the tensors make_source mapped) through its runs, into the spare canonical
  // buffer that then trades places with the canonical weights (no allocation once both exist).
  void gather(const std::vector<Block>& blocks, const std::vector<int>& index) {
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      const Shape& want = infos_[static_cast<std::size_t>(index[k])].shape;
      if (blocks[k].shape != std::vector<py::ssize_t>(want.dims, want.dims + want.ndim))
        bad_argument("weights: " + std::string(infos_[static_cast<std::size_t>(index[k])].name) + ": shape " +
                     shape_string(blocks[k].shape) + ", expected " +
                     shape_string(std::vector<py::ssize_t>(want.dims, want.dims + want.ndim)));
    }
    const std::size_t es = dtype_size(stack_.dtype);
    spare_canonical_.resize(canonical_.size());
    unsigned char* to = spare_canonical_.data();
    for (const Run& r : runs_) {
      if (r.tensor == kNoTensor)
        std::memset(to + r.canonical * es, 0, r.length * es);
      else
        std::memcpy(to + r.canonical * es, static_cast<const unsigned char*>(blocks[r.tensor].data) + r.offset * es,
                    r.length * es);
    }
    std::lock_guard<std::mutex> lock(mu_);
    canonical_.swap(spare_canonical_);
    packed_ok_ = false;
    ++imports_;
  }

  // The gradients of the tensors `index` from canonical ones, into `outs` (each of its tensor's size).
  void export_gradients_to(const unsigned char* dcanonical, const std::vector<int>& index,
                           const std::vector<void*>& outs) {
    const std::size_t es = dtype_size(stack_.dtype);
    if (!make_source(index)) {
      for (std::size_t k = 0; k < index.size(); ++k)
        check(export_gradient_tensor(stack_, format_, index[k], dcanonical, outs[k]));
      return;
    }
    if (!covers_all_)  // elements no canonical weight reads have a zero gradient
      for (std::size_t k = 0; k < index.size(); ++k)
        std::memset(outs[k], 0, elements(infos_[static_cast<std::size_t>(index[k])].shape) * es);
    for (const Run& r : runs_)
      if (r.tensor != kNoTensor)
        std::memcpy(static_cast<unsigned char*>(outs[r.tensor]) + r.offset * es, dcanonical + r.canonical * es,
                    r.length * es);
  }

  // Whether the blocks have the shapes and bytes of the last remember().
  bool same_bytes(const std::vector<Block>& blocks) const {
    if (blocks.size() != snapshot_shapes_.size() || blocks.empty()) return false;
    std::size_t offset = 0;
    const std::size_t es = dtype_size(stack_.dtype);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i].shape != snapshot_shapes_[i]) return false;
      std::size_t n = es;
      for (py::ssize_t d : blocks[i].shape) n *= static_cast<std::size_t>(d);
      if (n > 0 && std::memcmp(snapshot_.data() + offset, blocks[i].data, n) != 0) return false;
      offset += n;
    }
    return true;
  }

  // Keeps a copy of the blocks for same_bytes.
  void remember(const std::vector<Block>& blocks) {
    const std::size_t es = dtype_size(stack_.dtype);
    for (const Block& b : blocks) {
      std::size_t n = es;
      for (py::ssize_t d : b.shape) n *= static_cast<std::size_t>(d);
      const auto* p = static_cast<const unsigned char*>(b.data);
      snapshot_.insert(snapshot_.end(), p, p + n);
      snapshot_shapes_.push_back(b.shape);
    }
  }

  // After an import: neither check matches until the next take_tensors records its tensors.
  void forget_tensors() {
    snapshot_.clear();
    snapshot_shapes_.clear();
    versions_.clear();
    version_tensors_.clear();
    versions_valid_ = false;
  }

  // A run on the packed weights, without the GIL.
  Status run(const Plan& plan, const ForwardArgs& fa) {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    ensure_packed();
    return plan.forward(packed_.get(), workspace(plan.workspace_bytes()), plan.workspace_bytes(), fa);
  }
  Status run(const Plan& plan, const BackwardArgs& ba) {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    ensure_packed();
    const std::size_t bytes = plan.backward_workspace_bytes();
    return plan.backward(packed_.get(), workspace(bytes), bytes, ba);
  }

  StackSpec stack_;
  WeightFormat format_;
  std::string prefix_;
  PlanOptions options_;
  ThreadPool* pool_ = nullptr;
  std::string kernel_, backend_;
  std::vector<TensorInfo> infos_;  // the format's tensors
  std::vector<unsigned char> canonical_;
  std::vector<unsigned char> snapshot_;                      // remember()'s bytes
  std::vector<std::vector<py::ssize_t>> snapshot_shapes_;    // and each tensor's shape
  std::vector<std::pair<std::uintptr_t, long long>> versions_;  // by_version: the last import's keys
  std::vector<py::object> version_tensors_;  // and its tensors (kept: their memory cannot pass to another)
  bool versions_valid_ = false;
  std::size_t imports_ = 0;
  std::vector<int> source_index_;       // make_source's tensors
  struct Run {
    std::size_t canonical, tensor, offset, length;  // elements
  };
  static constexpr std::size_t kNoTensor = ~std::size_t{0};
  std::vector<Run> runs_;               // and its map, as runs (empty: none)
  bool covers_all_ = false;             // every element of those tensors has a canonical weight
  std::vector<unsigned char> spare_canonical_;  // gather's next canonical buffer
  std::mutex mu_;
  Buffer packed_, workspace_;
  std::size_t packed_bytes_ = 0, workspace_bytes_ = 0;
  bool packed_ok_ = false;
  mutable Plan planned_;  // plan_for's last plan
  mutable int planned_batch_ = 0, planned_seq_len_ = 0;
};

// A stack that starts with an Embedding reads token ids: integers [T, B] (or [B, T]) in [0, vocab), as
// a C-contiguous int32 array (ForwardArgs::x).
py::array token_ids(const py::handle& obj, int vocab, bool batch_first) {
  py::array a = py::array::ensure(obj);
  const std::string layout = batch_first ? "[B, T]" : "[T, B]";
  if (!a || (a.dtype().kind() != 'i' && a.dtype().kind() != 'u'))
    bad_argument("x: the stack starts with an Embedding: expected integer token ids " + layout + ", found " +
                 (a ? std::string(py::str(a.dtype())) + " " + shape_string(a) : std::string("no array")));
  if (a.ndim() != 2) bad_argument("x: token ids of shape " + shape_string(a) + ", expected " + layout);
  py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> v(a);
  py::array_t<std::int32_t> ids(std::vector<py::ssize_t>{a.shape(0), a.shape(1)});
  std::int32_t* out = ids.mutable_data();
  for (py::ssize_t k = 0; k < v.size(); ++k) {
    const std::int64_t id = v.data()[k];
    if (id < 0 || id >= vocab)
      bad_argument("x: token id " + std::to_string(id) + " at [" + std::to_string(k / a.shape(1)) + ", " +
                   std::to_string(k % a.shape(1)) + "] is outside the embedding's vocabulary [0, " +
                   std::to_string(vocab) + ")");
    out[k] = static_cast<std::int32_t>(id);
  }
  return std::move(ids);
}

// Checks one state block against the stack: its uniform shape, or (any layers) its element count.
void check_state(const Block& b, const char* name, const std::vector<py::ssize_t>& shape) {
  if (b.data == nullptr) return;
  std::size_t n = 1, have = 1;
  for (py::ssize_t d : shape) n *= static_cast<std::size_t>(d);
  for (py::ssize_t d : b.shape) have *= static_cast<std::size_t>(d);
  if ((shape.size() > 1 && b.shape != shape) || have != n)
    bad_argument(std::string(name) + ": shape " + shape_string(b.shape) + ", expected " + shape_string(shape));
}

// One state array checked against the stack (None: none).
Block state_array(const py::handle& obj, DType dtype, const char* name, const std::vector<py::ssize_t>& shape) {
  if (obj.is_none()) return Block{};
  Block b = array_block(dense(obj, dtype, name));
  check_state(b, name, shape);
  return b;
}

RunInputs Net::inputs(const py::handle& x, const py::handle& h0, const py::handle& c0, const py::handle& lengths,
                      const py::handle& row_ids, bool batch_first, const py::handle& resets) const {
  RunInputs in;
  in.batch_first = batch_first;
  in.x = array_block(stack_.embedding.vocab_size > 0 ? token_ids(x, stack_.embedding.vocab_size, batch_first)
                                                     : dense(x, stack_.dtype, "x"));
  if (!h0.is_none()) in.h0 = array_block(dense(h0, stack_.dtype, "h0"));
  if (!c0.is_none()) in.c0 = array_block(dense(c0, stack_.dtype, "c0"));
  complete(in, c0.is_none(), lengths, row_ids, resets);
  return in;
}

RunInputs Net::tensor_inputs(const py::handle& x, const py::handle& h0, const py::handle& c0,
                             const py::handle& lengths, const py::handle& row_ids, bool batch_first,
                             const py::handle& resets) const {
  RunInputs in;
  in.batch_first = batch_first;
  in.x = stack_.embedding.vocab_size > 0 ? array_block(token_ids(x, stack_.embedding.vocab_size, batch_first))
                                         : tensor_block(x, stack_.dtype, "input");
  if (!h0.is_none()) in.h0 = tensor_block(h0, stack_.dtype, "h0");
  if (!c0.is_none()) in.c0 = tensor_block(c0, stack_.dtype, "c0");
  complete(in, c0.is_none(), lengths, row_ids, resets);
  return in;
}

// Checks x's and the states' shapes and converts the small inputs (lengths, resets, row ids).
void Net::complete(RunInputs& in, bool no_c0, const py::handle& lengths, const py::handle& row_ids,
                   const py::handle& resets) const {
  const bool batch_first = in.batch_first;
  const std::vector<py::ssize_t>& xs = in.x.shape;
  if (stack_.embedding.vocab_size == 0 && (xs.size() != 3 || xs[2] != stack_.input_size))
    bad_argument("x: shape " + shape_string(xs) + ", expected " + (batch_first ? "[B, T, " : "[T, B, ") +
                 std::to_string(stack_.input_size) + "]");
  if (xs[0] > INT32_MAX || xs[1] > INT32_MAX) bad_argument("x: shape " + shape_string(xs));
  in.seq_len = static_cast<int>(xs[batch_first ? 1 : 0]);
  in.batch = static_cast<int>(xs[batch_first ? 0 : 1]);
  if (in.batch < 1 || in.seq_len < 1)
    bad_argument("x: shape " + shape_string(xs) + ": the batch and the length must be at least 1");
  const auto shapes = state_shapes(in.batch);
  check_state(in.h0, "h0", shapes.first);
  const bool lstm = stack_.layers[0].mode == Mode::lstm;
  if (!no_c0 && !lstm) bad_argument("c0: only an LSTM has a cell state");
  check_state(in.c0, "c0", shapes.second);
  if (!lengths.is_none()) in.lengths = lengths_of(lengths, in.batch);
  if (!resets.is_none()) in.resets = resets_of(resets, in.seq_len, in.batch, batch_first);
  if (!row_ids.is_none()) {
    py::array_t<std::int64_t> r = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(row_ids);
    if (!r || r.ndim() != 1 || r.shape(0) != in.batch)
      bad_argument("row_ids: expected an integer array of shape [" + std::to_string(in.batch) + "]");
    for (int b = 0; b < in.batch; ++b) {
      const std::int64_t v = r.at(b);
      if (v < 0 || v > UINT32_MAX) bad_argument("row_ids[" + std::to_string(b) + "] = " + std::to_string(v));
      in.row_ids.push_back(static_cast<std::uint32_t>(v));
    }
  }
}

ForwardArgs Net::forward_args(const RunInputs& in) const {
  ForwardArgs fa;
  fa.batch = in.batch;
  fa.seq_len = in.seq_len;
  fa.layout = in.batch_first ? Layout::batch_major : Layout::time_major;
  fa.x = in.x.data;
  fa.seq_lengths = in.lengths.empty() ? nullptr : in.lengths.data();
  fa.resets = in.resets.empty() ? nullptr : in.resets.data();
  fa.h0 = in.h0.data;
  fa.c0 = in.c0.data;
  fa.run_mode = in.mode;
  fa.seed = in.seed;
  fa.step = in.step;
  fa.row_ids = in.row_ids.empty() ? nullptr : in.row_ids.data();
  fa.time_offset = in.time_offset;
  return fa;
}

// A new NumPy array (uninitialised) of `dtype`, its large pages advised huge (advise_huge_pages).
py::array new_array(DType dtype, const std::vector<py::ssize_t>& shape) {
  py::array a(numpy_dtype(dtype), shape);
  advise_huge_pages(a.mutable_data(), static_cast<std::size_t>(a.nbytes()));
  return a;
}

// A new uint8 array of `bytes` zeros whose data is kAlignment-aligned (a view into a slightly larger one).
py::array aligned_bytes(std::size_t bytes) {
  py::array_t<std::uint8_t> base(static_cast<py::ssize_t>(bytes + kAlignment));
  advise_huge_pages(base.mutable_data(), static_cast<std::size_t>(base.nbytes()));
  // Zeroed: a run leaves bytes it does not use (padding) as they were, and an op's output must be
  // the same for the same inputs (torch.library.opcheck compares them).
  std::memset(base.mutable_data(), 0, static_cast<std::size_t>(base.nbytes()));
  const auto addr = reinterpret_cast<std::uintptr_t>(base.data());
  const py::ssize_t off = static_cast<py::ssize_t>((kAlignment - addr % kAlignment) % kAlignment);
  return py::array(base.attr("__getitem__")(py::slice(off, off + static_cast<py::ssize_t>(bytes), 1)));
}

// Runs the network: (y, hy, cy or None, reserve or None).
py::tuple Net::forward(const RunInputs& in, bool keep_reserve) {
  if (keep_reserve && !options_.training)
    fail(Status::unsupported, "a reserve for backward needs a net made for training (training=True)");
  Plan plan;
  check(plan_for(in.batch, in.seq_len, &plan));
  const auto shapes = state_shapes(in.batch);
  py::array y = new_array(stack_.dtype, y_shape(in));
  py::array hy(numpy_dtype(stack_.dtype), shapes.first);
  const bool lstm = stack_.layers[0].mode == Mode::lstm;
  py::array cy = lstm ? py::array(numpy_dtype(stack_.dtype), shapes.second) : py::array();
  py::array reserve = keep_reserve ? aligned_bytes(plan.reserve_bytes()) : py::array();
  ForwardArgs fa = forward_args(in);
  fa.y = y.mutable_data();
  fa.hy = hy.mutable_data();
  fa.cy = lstm ? cy.mutable_data() : nullptr;
  if (keep_reserve) {
    fa.reserve = reserve.mutable_data();
    fa.reserve_bytes = static_cast<std::size_t>(reserve.nbytes());
  }
  check(run(plan, fa));
  return py::make_tuple(y, hy, lstm ? py::object(cy) : py::none(), keep_reserve ? py::object(reserve) : py::none());
}

// rnncore.torch's forward: forward()'s outputs as new tensors. op_outputs: the custom op's four
// tensors (an empty c_n unless LSTM, an empty reserve unless kept) instead of None for those.
py::tuple Net::tensor_forward(const RunInputs& in, bool keep_reserve, bool op_outputs) {
  if (keep_reserve && !options_.training)
    fail(Status::unsupported, "a reserve for backward needs a net made for training (training=True)");
  Plan plan;
  check(plan_for(in.batch, in.seq_len, &plan));
  const auto shapes = state_shapes(in.batch);
  const bool lstm = stack_.layers[0].mode == Mode::lstm;
  ForwardArgs fa = forward_args(in);
  py::object y = new_tensor(y_shape(in), stack_.dtype, &fa.y);
  py::object hy = new_tensor(shapes.first, stack_.dtype, &fa.hy);
  void* unused = nullptr;
  py::object cy = lstm         ? new_tensor(shapes.second, stack_.dtype, &fa.cy)
                  : op_outputs ? new_tensor({0}, stack_.dtype, &unused)
                               : py::none();
  py::object reserve = op_outputs && !keep_reserve ? new_bytes(0, &unused) : py::none();
  if (keep_reserve) {
    // Zeroed, as forward()'s; torch's CPU allocator aligns to 64 bytes, a view makes sure of kAlignment.
    const std::size_t bytes = plan.reserve_bytes();
    reserve = new_bytes(bytes + kAlignment, &fa.reserve);
    const std::size_t off = (kAlignment - reinterpret_cast<std::uintptr_t>(fa.reserve) % kAlignment) % kAlignment;
    std::memset(fa.reserve, 0, bytes + kAlignment);
    reserve = reserve.attr("narrow")(0, off, bytes);
    fa.reserve = static_cast<unsigned char*>(fa.reserve) + off;
    fa.reserve_bytes = bytes;
  }
  check(run(plan, fa));
  return py::make_tuple(y, hy, cy, reserve);
}

// Backward after a training forward with the same inputs: (dx, dh0, dc0 or None, dcanonical).
py::tuple Net::backward(const RunInputs& in, const py::handle& reserve, const py::handle& dy, const py::handle& dhy,
                        const py::handle& dcy, bool need_dx) {
  if (!options_.training) fail(Status::unsupported, "backward needs a net made for training (training=True)");
  Plan plan;
  check(plan_for(in.batch, in.seq_len, &plan));
  py::array_t<std::uint8_t> res = py::array_t<std::uint8_t>::ensure(reserve);
  if (!res || !(res.flags() & py::array::c_style) || static_cast<std::size_t>(res.nbytes()) < plan.reserve_bytes())
    bad_argument("reserve: expected the uint8 reserve the training forward returned");
  const auto shapes = state_shapes(in.batch);
  const bool lstm = stack_.layers[0].mode == Mode::lstm;
  const Block dya = state_array(dy, stack_.dtype, "dy", y_shape(in));
  const Block dhya = state_array(dhy, stack_.dtype, "dhy", shapes.first);
  if (!dcy.is_none() && !lstm) bad_argument("dcy: only an LSTM has a cell state");
  const Block dcya = state_array(dcy, stack_.dtype, "dcy", shapes.second);
  // With an Embedding, x is token ids: no dx (the table's gradient is in dw); none either when not asked
  // for (the backward then skips the first layer's input product).
  const bool no_dx = stack_.embedding.vocab_size > 0 || !need_dx;
  py::array dx = no_dx ? py::array() : new_array(stack_.dtype, in.x.shape);
  py::array dh0(numpy_dtype(stack_.dtype), shapes.first);
  py::array dc0 = lstm ? py::array(numpy_dtype(stack_.dtype), shapes.second) : py::array();
  py::array dw = new_array(stack_.dtype, std::vector<py::ssize_t>{static_cast<py::ssize_t>(param_count(stack_))});
  BackwardArgs ba;
  ba.forward = forward_args(in);
  ba.forward.reserve = const_cast<std::uint8_t*>(res.data());
  ba.forward.reserve_bytes = static_cast<std::size_t>(res.nbytes());
  ba.dy = dya.data;
  ba.dhy = dhya.data;
  ba.dcy = dcya.data;
  ba.dx = no_dx ? nullptr : dx.mutable_data();
  ba.dh0 = dh0.mutable_data();
  ba.dc0 = lstm ? dc0.mutable_data() : nullptr;
  ba.dweights = dw.mutable_data();
  check(run(plan, ba));
  return py::make_tuple(no_dx ? py::object(py::none()) : py::object(dx), dh0, lstm ? py::object(dc0) : py::none(), dw);
}

// rnncore.torch's backward: backward()'s outputs as new tensors, the weights' gradients as the
// format's first `weights` tensors (given_tensors) instead of canonical ones.
py::tuple Net::tensor_backward(const RunInputs& in, const py::handle& reserve, const py::handle& dy,
                               const py::handle& dhy, const py::handle& dcy, std::size_t weights, bool need_dx,
                               bool need_dw) {
  if (!options_.training) fail(Status::unsupported, "backward needs a net made for training (training=True)");
  const std::vector<int> index = given_tensors(weights);
  Plan plan;
  check(plan_for(in.batch, in.seq_len, &plan));
  if (!reserve_fits(reserve, plan.reserve_bytes()))
    bad_argument("reserve: expected the uint8 reserve the training forward returned");
  const auto shapes = state_shapes(in.batch);
  const bool lstm = stack_.layers[0].mode == Mode::lstm;
  const Block dyb = tensor_block(dy, stack_.dtype, "dy"), dhb = tensor_block(dhy, stack_.dtype, "dhy");
  check_state(dyb, "dy", y_shape(in));
  check_state(dhb, "dhy", shapes.first);
  if (!dcy.is_none() && !lstm) bad_argument("dcy: only an LSTM has a cell state");
  const Block dcb = dcy.is_none() ? Block{} : tensor_block(dcy, stack_.dtype, "dcy");
  check_state(dcb, "dcy", shapes.second);
  // Token ids (an Embedding) have no dx; nor does an input autograd does not ask about (need_dx false):
  // the backward then skips the first layer's input product, one of its four.
  const bool no_dx = stack_.embedding.vocab_size > 0 || !need_dx;
  BackwardArgs ba;
  ba.forward = forward_args(in);
  ba.forward.reserve = tensor_data(reserve);
  ba.forward.reserve_bytes = plan.reserve_bytes();
  ba.dy = dyb.data;
  ba.dhy = dhb.data;
  ba.dcy = dcb.data;
  py::object dx = no_dx ? py::none() : new_tensor(in.x.shape, stack_.dtype, &ba.dx);
  py::object dh0 = new_tensor(shapes.first, stack_.dtype, &ba.dh0);
  py::object dc0 = lstm ? new_tensor(shapes.second, stack_.dtype, &ba.dc0) : py::none();
  // Weights that need no gradient (frozen): none, and the backward skips the weight products.
  Buffer dw = need_dw ? aligned_buffer(static_cast<std::size_t>(param_count(stack_)) * dtype_size(stack_.dtype)) : Buffer();
  ba.dweights = need_dw ? dw.get() : nullptr;
  check(run(plan, ba));
  py::list grads;
  if (!need_dw) return py::make_tuple(dx, dh0, dc0, grads);
  std::vector<void*> outs(index.size());
  for (std::size_t k = 0; k < index.size(); ++k) {
    const Shape& s = infos_[static_cast<std::size_t>(index[k])].shape;
    grads.append(new_tensor(std::vector<py::ssize_t>(s.dims, s.dims + s.ndim), stack_.dtype, &outs[k]));
  }
  export_gradients_to(dw.get(), index, outs);
  return py::make_tuple(dx, dh0, dc0, grads);
}

// ---- building nets ----

PlanOptions plan_options(int threads, const std::string& backend, bool training, const std::string& weight_dtype) {
  PlanOptions o;
  if (threads < 1) bad_argument("threads: " + std::to_string(threads) + ", expected at least 1");
  o.threads = threads;
  o.backend = parse_backend(backend);
  o.training = training;
  o.weight_dtype = parse_weight_dtype(weight_dtype);
  return o;
}

// A uniform stack in torch.nn's terms.
std::unique_ptr<Net> make_net(const std::string& mode, int input_size, int hidden_size, int num_layers,
                              bool bidirectional, int proj_size, double dropout, const std::string& gru,
                              const std::string& dtype, int threads, const std::string& backend, bool training,
                              const std::string& format, const std::string& weight_dtype) {
  RnnSpec spec;
  spec.mode = parse_mode_arg(mode);
  if (!io::parse_gru_variant(gru, &spec.gru_variant))
    fail(Status::invalid_enum, "gru '" + gru + "': expected reset-after or reset-before");
  spec.input_size = input_size;
  spec.hidden_size = hidden_size;
  spec.num_layers = num_layers;
  spec.direction = bidirectional ? Direction::bidirectional : Direction::unidirectional;
  spec.proj_size = proj_size;
  spec.dropout = dropout;
  spec.dtype = parse_dtype(dtype);
  check(validate(spec));
  WeightFormat f;
  if (!io::parse_format(format, &f)) fail(Status::invalid_enum, "format '" + format + "'");
  return std::make_unique<Net>(to_stack(spec), f, "", plan_options(threads, backend, training, weight_dtype));
}

// A stack configuration (docs/config.md, JSON text) with zero weights in `format`'s tensors: what
// rnncore.torch.Stack runs.
std::unique_ptr<Net> config_net(const std::string& config_text, const std::string& dtype, int threads,
                                const std::string& backend, bool training, const std::string& format,
                                const std::string& weight_dtype) {
  StackSpec config;
  std::string error;
  const Status cs = io::parse_stack_config(config_text.data(), config_text.size(), "config", &config, &error);
  if (cs != Status::ok) fail(cs, error);
  if (config.input_size < 1) bad_argument("config: input_size must be given (the weights do not say it here)");
  config.dtype = parse_dtype(dtype);
  WeightFormat f;
  if (!io::parse_format(format, &f)) fail(Status::invalid_enum, "format '" + format + "'");
  return std::make_unique<Net>(config, f, "", plan_options(threads, backend, training, weight_dtype));
}

std::unique_ptr<Net> load_net(const std::string& path, const std::string& format, const py::object& prefix,
                              const std::string& mode, const std::string& gru, const std::string& dtype,
                              int threads, const std::string& backend, bool training, const py::object& dropout,
                              const std::string& config_path, const std::string& config_text,
                              const std::string& head_activation, const std::string& head_last_step,
                              const std::string& weight_dtype) {
  io::ModelHints hints;
  hints.head_activation = head_activation;
  hints.head_last_step = head_last_step;
  hints.format = format;
  if (!prefix.is_none()) {
    hints.prefix = prefix.cast<std::string>();
    hints.prefix_given = true;
  }
  hints.mode = mode;
  hints.gru = gru;
  hints.dtype = parse_dtype(dtype);
  // A stack configuration (docs/config.md): layers and wrappers, as `rnncore run --config`.
  StackSpec config;
  std::string error;
  if (!config_path.empty() || !config_text.empty()) {
    const Status cs = config_path.empty()
                          ? io::parse_stack_config(config_text.data(), config_text.size(), "config", &config, &error)
                          : io::read_stack_config(config_path, &config, &error);
    if (cs != Status::ok) fail(cs, error);
  }
  const bool has_config = !config_path.empty() || !config_text.empty();
  io::LoadedModel loaded;
  const Status s = io::load_weights(path, hints, has_config ? &config : nullptr, &loaded, &error);
  if (s != Status::ok) fail(s, error);
  if (!dropout.is_none()) loaded.stack.dropout = dropout.cast<double>();  // as `rnncore run --dropout P`
  auto net = std::make_unique<Net>(loaded.stack, loaded.format, loaded.prefix,
                                   plan_options(threads, backend, training, weight_dtype));
  net->set_canonical(py::array(numpy_dtype(loaded.stack.dtype), std::vector<py::ssize_t>{static_cast<py::ssize_t>(param_count(loaded.stack))},
                               reinterpret_cast<const void*>(loaded.canonical.data())));
  net->notes = loaded.notes;
  net->ignored = loaded.ignored;
  net->ends = loaded.ends;
  return net;
}

// ---- io::quantize and io::export_c (file paths in; rnncore/__init__.py writes arrays to .npy) ----

io::ModelHints model_hints(const std::string& format, const py::object& prefix, const std::string& mode,
                           const std::string& gru) {
  io::ModelHints h;
  h.format = format;
  if (!prefix.is_none()) {
    h.prefix = prefix.cast<std::string>();
    h.prefix_given = true;
  }
  h.mode = mode;
  h.gru = gru;
  return h;
}

py::dict accuracy_dict(const io::QuantizeAccuracy& a) {
  py::dict d;
  d["data"] = a.data;
  d["shape"] = py::make_tuple(a.T, a.B, a.H);
  d["values"] = a.values;
  d["max_abs"] = a.max_abs;
  d["rms"] = a.rms;
  d["range"] = a.range;
  d["snr_db"] = a.snr_db;
  return d;
}

// io::quantize without the GIL: its report as a dict (accuracy on the calibration and eval data).
py::dict quantize_file(io::QuantizeOptions o, const py::object& cell_clip) {
  if (!cell_clip.is_none()) {
    o.set_cell_clip = true;
    o.cell_clip = cell_clip.cast<double>();
  }
  std::vector<std::string> notes;
  o.note = [&notes](const std::string& line) { notes.push_back(line); };
  io::QuantizeReport report;
  std::string err;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = io::quantize(o, &report, &err);
  }
  if (s != Status::ok) throw StatusError{s, std::string(status_message(s)) + ": " + err, report.option_error};
  py::dict d;
  d["model"] = report.model;
  d["calibration"] = report.calibration;
  d["quantization"] = report.quantization;
  d["written"] = report.written;
  d["calibration_accuracy"] = accuracy_dict(report.calibration_accuracy);
  d["eval_accuracy"] = report.has_eval ? py::object(accuracy_dict(report.eval_accuracy)) : py::none();
  d["notes"] = notes;
  return d;
}

// io::export_c: (the header's text, its one-line summary, the loader's notes).
py::tuple export_c_text(const io::ExportCOptions& o) {
  std::string header, err;
  io::ExportCReport report;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = io::export_c(o, &header, &report, &err);
  }
  if (s != Status::ok) throw StatusError{s, std::string(status_message(s)) + ": " + err, report.option_error};
  return py::make_tuple(header, report.summary, report.notes);
}

// io::write_safetensors of float32 / float64 arrays (rnncore.load of a PyTorch network goes through it).
void save_safetensors(const std::string& path, const std::vector<std::string>& names, const py::list& arrays,
                      const std::vector<std::pair<std::string, std::string>>& metadata) {
  if (names.size() != py::len(arrays)) bad_argument("save_safetensors: as many names as arrays");
  std::vector<py::array> keep;
  std::vector<io::TensorToWrite> tensors;
  for (std::size_t i = 0; i < names.size(); ++i) {
    py::array a = py::array::ensure(arrays[i], py::array::c_style);
    const bool f64 = a && a.dtype().is(py::dtype::of<double>());
    if (!a || !(f64 || a.dtype().is(py::dtype::of<float>())))
      bad_argument("save_safetensors: " + names[i] + ": expected a float32 or float64 array");
    keep.push_back(a);
    io::TensorToWrite t;
    t.name = names[i];
    t.type = f64 ? io::ElemType::f64 : io::ElemType::f32;
    t.shape.assign(a.shape(), a.shape() + a.ndim());
    t.data = a.data();
    tensors.push_back(std::move(t));
  }
  if (io::write_safetensors(path.c_str(), tensors, metadata) != RNNCORE_OK)
    fail(Status::io, rnncore_last_error_detail());
}

void bind_io(py::module_& m) {
  m.def("save_safetensors", &save_safetensors, py::arg("path"), py::arg("names"), py::arg("arrays"),
        py::arg("metadata"));
  m.def(
      "quantize",
      [](const std::string& weights, const std::string& calibration, const std::string& output,
         const std::string& eval, const std::string& config, bool batch_first, long long carry_state,
         const py::object& cell_clip, const std::string& cell_range, bool per_channel, const std::string& format,
         const py::object& prefix, const std::string& mode) {
        io::QuantizeOptions o;
        o.hints = model_hints(format, prefix, mode, "");
        o.weights = weights;
        o.calibration = calibration;
        o.output = output;
        o.eval = eval;
        o.config = config;
        o.batch_first = batch_first;
        o.carry_state = carry_state;
        o.cell_range = cell_range;
        o.per_channel = per_channel;
        return quantize_file(std::move(o), cell_clip);
      },
      py::arg("weights"), py::arg("calibration"), py::arg("output"), py::arg("eval") = "", py::arg("config") = "",
      py::arg("batch_first") = false, py::arg("carry_state") = 0, py::arg("cell_clip") = py::none(),
      py::arg("cell_range") = "every-step", py::arg("per_channel") = false, py::arg("format") = "",
      py::arg("prefix") = py::none(), py::arg("mode") = "");
  m.def(
      "export_c",
      [](const std::string& weights, const std::string& output, const std::string& name,
         const std::string& sample_input, const std::string& sample_output, long long max_batch,
         long long max_seq_len, bool interleave, const std::string& format, const py::object& prefix,
         const std::string& mode, const std::string& gru) {
        io::ExportCOptions o;
        o.hints = model_hints(format, prefix, mode, gru);
        o.weights = weights;
        o.name = name.empty() ? io::c_identifier_from(output.empty() ? weights : output) : name;
        o.output = output.empty() ? o.name + ".h" : output;  // the header's first comment names it
        o.sample_input = sample_input;
        o.sample_output = sample_output;
        o.max_batch = max_batch;
        o.max_seq_len = max_seq_len;
        o.interleave = interleave;
        return export_c_text(o);
      },
      py::arg("weights"), py::arg("output") = "", py::arg("name") = "", py::arg("sample_input") = "",
      py::arg("sample_output") = "", py::arg("max_batch") = 0, py::arg("max_seq_len") = 0,
      py::arg("interleave") = false, py::arg("format") = "", py::arg("prefix") = py::none(), py::arg("mode") = "",
      py::arg("gru") = "");
}

// ---- int8 model files (format tflite_int8, docs/int8.md): io::Int8Runner, as `rnncore run` runs one ----

bool is_int8_file(const std::string& path) {
  io::SafeTensors file;
  return io::read_safetensors(path.c_str(), &file) == RNNCORE_OK && io::is_int8_model(file);
}

// An int8 model file, loaded and prepared; each run plans nothing and takes the mutex without the GIL.
struct Int8Net {
  io::Int8Runner runner;
  std::string origin;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::mutex mutex;

  // threads: the rows of a run on that many threads (the Model of the file's StackSpec,
  // io::load_int8_spec; Int8Runner::plan). The same bits for any count.
  Int8Net(const std::string& path, int threads) {
    if (threads < 1) bad_argument("threads: " + std::to_string(threads) + ", expected at least 1");
    io::SafeTensors file;
    if (io::read_safetensors(path.c_str(), &file) != RNNCORE_OK) fail(Status::io, rnncore_last_error_detail());
    std::string error;
    Status s = io::Int8Runner::load(file, &runner, &error);
    if (s != Status::ok) fail(s, error);
    if ((s = runner.plan(1, 1, threads, &error)) != Status::ok) fail(s, error);
    origin = io::int8_model_origin(file);
    metadata = file.metadata;
  }

  // x as the model reads it, [B, T, I] int8 in the order of its steps: int8 as given, floating point
  // quantized as TFLite's QUANTIZE op, token ids [B, T] looked up in the embedding.
  std::vector<std::int8_t> input(const py::handle& obj, py::ssize_t* B, py::ssize_t* T) const {
    py::array a = py::array::ensure(obj);
    if (!a) bad_argument("x: expected an array");
    const char kind = a.dtype().kind();
    const bool ids = kind == 'i' && a.itemsize() > 1, i8 = kind == 'i' && a.itemsize() == 1;
    const py::ssize_t I = runner.input_size();
    const std::string expected = "[B, T, " + std::to_string(I) + "] (batch-major, as the TFLite op)";
    if (runner.has_embedding() && !ids)
      bad_argument("x: the model starts with an Embedding: expected token ids [B, T] (int32 or int64), found " +
                   std::string(py::str(a.dtype())) + " " + shape_string(a));
    if (!runner.has_embedding() && !i8 && kind != 'f')
      bad_argument("x: expected int8 or floating-point input " + expected + ", found " + std::string(py::str(a.dtype())) +
                   " " + shape_string(a));
    if (ids ? a.ndim() != 2 : a.ndim() != 3 || a.shape(2) != I)
      bad_argument("x: expected shape " + (ids ? std::string("[B, T] (token ids)") : expected) + ", found " +
                   shape_string(a));
    *B = a.shape(0);
    *T = a.shape(1);
    if (*B < 1 || *T < 1) bad_argument("x: expected at least one row and one step, found " + shape_string(a));
    if (*T > (1 << 28) || *B > (1 << 24)) bad_argument("x: sequence or batch too large");
    const std::size_t n = static_cast<std::size_t>(*B * *T);
    std::vector<std::int8_t> x(n * static_cast<std::size_t>(I));
    if (ids) {
      py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> v(a);
      const std::size_t bad = runner.embed_ids(n, v.data(), x.data());
      if (bad != n)
        bad_argument("x: token id " + std::to_string(v.data()[bad]) + " at [" + std::to_string(bad / *T) + ", " +
                     std::to_string(bad % *T) + "] is outside the embedding's vocabulary [0, " +
                     std::to_string(runner.vocab()) + ")");
    } else if (i8) {
      py::array_t<std::int8_t, py::array::c_style | py::array::forcecast> v(a);
      if (!x.empty()) std::memcpy(x.data(), v.data(), x.size());
    } else {
      py::array_t<float, py::array::c_style | py::array::forcecast> v(a);
      for (std::size_t k = 0; k < x.size(); ++k) x[k] = runner.quantize_input(v.data()[k]);
    }
    if (runner.reverse_input())  // Keras go_backwards: the model's REVERSE_V2 of the time axis
      for (py::ssize_t b = 0; b < *B; ++b)
        for (py::ssize_t t = 0; t < *T / 2; ++t)
          std::swap_ranges(x.begin() + (b * *T + t) * I, x.begin() + (b * *T + t + 1) * I,
                           x.begin() + (b * *T + *T - 1 - t) * I);
    return x;
  }

  // A state h0 (int8) or c0 (int16) of the shape the run returns hn / cn in.
  template <typename T>
  py::object state(const py::handle& obj, py::ssize_t B, const char* name) const {
    if (obj.is_none()) return py::none();
    py::array a = py::array::ensure(obj);
    const std::vector<std::int64_t> shape = runner.state_shape(B);
    if (!a || !a.dtype().is(py::dtype::of<T>()) ||
        std::vector<std::int64_t>(a.shape(), a.shape() + a.ndim()) != shape)
      bad_argument(std::string(name) + ": expected " + (sizeof(T) == 1 ? "int8" : "int16") + " " +
                   dims_text(shape) + " (the states a run returns), found " +
                   (a ? std::string(py::str(a.dtype())) + " " + shape_string(a) : std::string("no array")));
    return py::array_t<T, py::array::c_style | py::array::forcecast>(a);
  }

  static std::string dims_text(const std::vector<std::int64_t>& d) {
    std::string s = "[";
    for (std::size_t k = 0; k < d.size(); ++k) s += (k ? ", " : "") + std::to_string(d[k]);
    return s + "]";
  }

  // Floating-point values quantized as the model's input (TFLite's QUANTIZE op), any shape.
  py::array_t<std::int8_t> quantize(const py::handle& obj) const {
    py::array_t<float, py::array::c_style | py::array::forcecast> v = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(obj);
    if (!v) bad_argument("quantize_input: expected floating-point values");
    py::array_t<std::int8_t> q(std::vector<py::ssize_t>(v.shape(), v.shape() + v.ndim()));
    std::int8_t* out = q.mutable_data();
    for (py::ssize_t k = 0; k < v.size(); ++k) out[k] = runner.quantize_input(v.data()[k]);
    return q;
  }

  py::tuple run(const py::handle& x_obj, const py::handle& h0_obj, const py::handle& c0_obj) {
    py::ssize_t B = 0, T = 0;
    const std::vector<std::int8_t> x = input(x_obj, &B, &T);
    const py::object h0 = state<std::int8_t>(h0_obj, B, "h0"), c0 = state<std::int16_t>(c0_obj, B, "c0");
    const py::ssize_t O = runner.output_size();
    std::vector<py::ssize_t> yshape{B, O};
    if (runner.return_sequences()) yshape = {B, T, O};
    const std::vector<std::int64_t> s64 = runner.state_shape(B);
    const std::vector<py::ssize_t> sshape(s64.begin(), s64.end());
    py::array_t<std::int8_t> y(yshape), hn(sshape);
    py::array_t<std::int16_t> cn(sshape);
    const std::int8_t* h0p = h0.is_none() ? nullptr : py::array_t<std::int8_t>(h0).data();
    const std::int16_t* c0p = c0.is_none() ? nullptr : py::array_t<std::int16_t>(c0).data();
    std::int8_t* yp = y.mutable_data();
    std::int8_t* hp = hn.mutable_data();
    std::int16_t* cp = cn.mutable_data();
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mutex);
      runner.run(static_cast<int>(B), static_cast<int>(T), x.data(), yp, h0p, c0p, hp, cp);
    }
    return py::make_tuple(y, hn, cn);
  }
};

// What `rnncore info` prints, as a dict.
py::dict info() {
  py::dict d;
  d["version"] = version_string();
  Isa isas[8];
  const int n = available_isas(isas, 8);
  py::list isa_names;
  for (int i = 0; i < n; ++i) isa_names.append(to_string(isas[i]));
  d["isas"] = isa_names;
  py::list backends;
  backends.append("reference (f32, f64)");
  if (n > 0) backends.append("simd (f32)");
  const std::string gpu = gpu_backend_kind();
  if (gpu != "none") backends.append("gpu (" + gpu + ")");
  d["backends"] = backends;
  py::dict kernels;
  RnnSpec probe;
  probe.input_size = probe.hidden_size = 8;
  for (DType w : {DType::f32, DType::bf16, DType::f16}) {
    PlanOptions o;
    o.weight_dtype = w;
    Plan p;
    kernels[to_string(w)] = Plan::create(probe, o, &p) == Status::ok ? py::object(py::str(p.kernel_name())) : py::none();
  }
  probe.dtype = DType::f64;
  Plan p64;
  kernels["f64"] = Plan::create(probe, PlanOptions{}, &p64) == Status::ok ? py::object(py::str(p64.kernel_name())) : py::none();
  // The integer LSTM's (int8 model files, rnncore.quantize): its matrix-vector and step kernels.
  const io::Int8KernelNames int8 = io::int8_best_kernels();
  kernels["int8"] = int8.dot + " + " + int8.step;
  d["kernels"] = kernels;
  ThreadPool* pool = nullptr;
  d["threads"] = ThreadPool::create(1, &pool) == Status::ok;
  ThreadPool::destroy(pool);
  char desc[256];
  d["gpu"] = gpu == "none" ? std::string("not built")
                           : gpu + (gpu_describe(0, desc, sizeof desc) == Status::ok ? std::string(": ") + desc
                                                                                     : std::string(": no usable device"));
  return d;
}

void raise_status_error(const StatusError& e) {
  PyObject* cls = e.argument || is_argument_status(e.status) ? g_argument_error : g_error;
  py::object exc = py::reinterpret_borrow<py::object>(cls)(e.message);
  exc.attr("status") = py::str(status_message(e.status));
  PyErr_SetObject(cls, exc.ptr());
}

}  // namespace

// rnncore.torch's one call per run (positional, for speed): the weights' check and import, the run,
// torch tensors in and out.
void bind_tensor_runs(py::class_<Net>& net) {
  // forward -> (y, hy, cy or None, reserve or None; with op_outputs empty tensors for the Nones).
  net.def("tensor_forward",
           [](Net& n, const py::handle& x, const py::sequence& weights, const py::handle& h0, const py::handle& c0,
              const py::handle& lengths, const py::handle& row_ids, const py::handle& resets, bool batch_first,
              const std::string& mode, std::uint64_t seed, std::uint64_t step, bool by_version, bool keep_reserve,
              bool op_outputs) {
             RunInputs in = n.tensor_inputs(x, h0, c0, lengths, row_ids, batch_first, resets);
             in.mode = parse_run_mode(mode);
             in.seed = seed;
             in.step = step;
             n.take_tensors(weights, by_version);
             return n.tensor_forward(in, keep_reserve, op_outputs);
           })
      // backward -> (dx or None (token ids, or need_dx false), dh0, dc0 or None, [the weights' gradients]
      // (none: need_dw false)]).
      .def("tensor_backward",
           [](Net& n, const py::handle& x, const py::sequence& weights, const py::handle& h0, const py::handle& c0,
              const py::handle& lengths, const py::handle& row_ids, const py::handle& resets, bool batch_first,
              const std::string& mode, std::uint64_t seed, std::uint64_t step, bool by_version,
              const py::handle& reserve, const py::handle& dy, const py::handle& dhy, const py::handle& dcy,
              bool need_dx, bool need_dw) {
             RunInputs in = n.tensor_inputs(x, h0, c0, lengths, row_ids, batch_first, resets);
             in.mode = parse_run_mode(mode);
             in.seed = seed;
             in.step = step;
             n.take_tensors(weights, by_version);
             return n.tensor_backward(in, reserve, dy, dhy, dcy, py::len(weights), need_dx, need_dw);
           },
           py::arg("x"), py::arg("weights"), py::arg("h0"), py::arg("c0"), py::arg("lengths"), py::arg("row_ids"),
           py::arg("resets"), py::arg("batch_first"), py::arg("mode"), py::arg("seed"), py::arg("step"),
           py::arg("by_version"), py::arg("reserve"), py::arg("dy"), py::arg("dhy"), py::arg("dcy"),
           py::arg("need_dx") = true, py::arg("need_dw") = true);
}

PYBIND11_MODULE(_core, m) {
  m.doc() = "rnncore's extension: fused LSTM / GRU / RNN stacks over NumPy arrays (use the rnncore package)";
  g_error = PyErr_NewExceptionWithDoc("rnncore.Error", "A failure reported by rnncore (its status and detail line).",
                                      PyExc_RuntimeError, nullptr);
  py::tuple bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError));
  g_argument_error = PyErr_NewExceptionWithDoc("rnncore.ArgumentError", "A bad argument (shape, size, value, dtype).",
                                               bases.ptr(), nullptr);
  m.attr("Error") = py::handle(g_error);
  m.attr("ArgumentError") = py::handle(g_argument_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      raise_status_error(e);
    }
  });

  m.def("info", &info, "Version, backends, instruction sets and kernels (what `rnncore info` prints).");
  m.def("version", [] { return std::string(version_string()); });
  // rnncore.torch's choice of how runs read and make tensors: libtorch's stable C ABI when `library`
  // (the loaded libtorch's path; None: the process's global symbols) has it, else torch's Python API.
  m.def(
      "torch_abi",
      [](const py::handle& library, bool enable) {
        if (!enable) {
          rnncore_py::torch_abi_disable();
          return false;
        }
        return library.is_none() ? rnncore_py::torch_abi_load(nullptr)
                                 : rnncore_py::torch_abi_load(library.cast<std::string>().c_str());
      },
      py::arg("library"), py::arg("enable") = true,
      "Reads and makes torch tensors through libtorch's stable C ABI (true when found), or not (enable=False).");
  bind_io(m);

  m.def("is_int8_model", &is_int8_file, py::arg("path"));
  py::class_<Int8Net>(m, "Int8Net")
      .def(py::init<const std::string&, int>(), py::arg("path"), py::arg("threads") = 1)
      .def_property_readonly("input_size", [](const Int8Net& n) { return n.runner.input_size(); })
      .def_property_readonly("output_size", [](const Int8Net& n) { return n.runner.output_size(); })
      .def_property_readonly("return_sequences", [](const Int8Net& n) { return n.runner.return_sequences(); })
      .def_property_readonly("reverse_input", [](const Int8Net& n) { return n.runner.reverse_input(); })
      .def_property_readonly("has_embedding", [](const Int8Net& n) { return n.runner.has_embedding(); })
      .def_property_readonly("vocab", [](const Int8Net& n) { return n.runner.vocab(); })
      .def_property_readonly("kernel", [](const Int8Net& n) { return n.runner.kernel_names(); })
      .def_property_readonly("description", [](const Int8Net& n) { return n.runner.describe(); })
      .def_readonly("origin", &Int8Net::origin)
      .def_readonly("metadata", &Int8Net::metadata)
      .def("state_shape", [](const Int8Net& n, std::int64_t batch) { return n.runner.state_shape(batch); },
           py::arg("batch"))
      .def("quantize_input", &Int8Net::quantize, py::arg("x"))
      .def("run", &Int8Net::run, py::arg("x"), py::arg("h0") = py::none(), py::arg("c0") = py::none());

  py::class_<Net> net(m, "Net");
  net.def(py::init(&make_net), py::arg("mode"), py::arg("input_size"), py::arg("hidden_size"),
           py::arg("num_layers") = 1, py::arg("bidirectional") = false, py::arg("proj_size") = 0,
           py::arg("dropout") = 0.0, py::arg("gru") = "reset-after", py::arg("dtype") = "float32",
           py::arg("threads") = 1, py::arg("backend") = "auto", py::arg("training") = false,
           py::arg("format") = "pytorch", py::arg("weight_dtype") = "f32")
      .def_static("from_config", &config_net, py::arg("config"), py::arg("dtype") = "float32",
                  py::arg("threads") = 1, py::arg("backend") = "auto", py::arg("training") = false,
                  py::arg("format") = "pytorch", py::arg("weight_dtype") = "f32")
      .def_static("load", &load_net, py::arg("path"), py::arg("format") = "", py::arg("prefix") = py::none(),
                  py::arg("mode") = "", py::arg("gru") = "", py::arg("dtype") = "float32", py::arg("threads") = 1,
                  py::arg("backend") = "auto", py::arg("training") = false, py::arg("dropout") = py::none(),
                  py::arg("config_path") = "", py::arg("config_text") = "", py::arg("head_activation") = "",
                  py::arg("head_last_step") = "", py::arg("weight_dtype") = "f32")
      .def_property_readonly("weight_dtype", [](const Net& n) { return std::string(to_string(n.weight_dtype())); })
      .def_property_readonly("input_size", [](const Net& n) { return n.stack().input_size; })
      .def_property_readonly("num_layers", [](const Net& n) { return n.stack().num_layers; })
      .def_property_readonly("mode", [](const Net& n) { return std::string(to_string(n.stack().layers[0].mode)); })
      .def_property_readonly("hidden_sizes", [](const Net& n) {
        std::vector<int> h;
        for (int l = 0; l < n.stack().num_layers; ++l) h.push_back(n.stack().layers[l].hidden_size);
        return h;
      })
      .def_property_readonly("bidirectional", [](const Net& n) { return n.stack().layers[0].direction == Direction::bidirectional; })
      .def_property_readonly("dtype", [](const Net& n) { return numpy_dtype(n.stack().dtype); })
      .def_property_readonly("dropout", [](const Net& n) { return n.stack().dropout; })
      .def_property_readonly("output_width", &Net::output_width)
      .def_property_readonly("vocab_size", [](const Net& n) { return n.stack().embedding.vocab_size; })
      .def_property_readonly("head", [](const Net& n) -> py::object {
        const DenseSpec& h = n.stack().head;
        if (h.out_features == 0) return py::none();
        return py::make_tuple(h.out_features, std::string(to_string(h.activation)), h.last_step_only);
      })
      .def_readonly("ends", &Net::ends)
      .def_property_readonly("param_count", [](const Net& n) { return param_count(n.stack()); })
      .def_property_readonly("format", [](const Net& n) { return std::string(to_string(n.format())); })
      .def_property_readonly("prefix", &Net::prefix)
      .def_property_readonly("training", &Net::training)
      .def_property_readonly("threads", &Net::threads)
      .def_property_readonly("kernel", &Net::kernel)
      .def_property_readonly("backend", &Net::backend)
      .def_readonly("notes", &Net::notes)
      .def_readonly("ignored", &Net::ignored)
      .def("state_shapes", &Net::state_shapes, py::arg("batch"))
      .def("reserve_bytes", &Net::reserve_bytes, py::arg("batch"), py::arg("seq_len"))
      .def("tensors", &Net::tensors)
      .def("canonical", &Net::canonical)
      .def("set_canonical", &Net::set_canonical, py::arg("values"))
      .def("set_weights", &Net::set_weights, py::arg("values"))
      .def_property_readonly("imports", &Net::imports)  // how many times weights were imported (tests)
      .def("export", [](const Net& n) { return n.export_tensors(py::none(), false); })
      .def("end_tensors", &Net::end_tensors, py::arg("canonical"))
      .def("export_gradients", [](const Net& n, const py::handle& dc) { return n.export_tensors(dc, true); },
           py::arg("dcanonical"))
      .def(
          "forward",
          [](Net& n, const py::handle& x, const py::handle& h0, const py::handle& c0, const py::handle& lengths,
             bool batch_first, const std::string& mode, std::uint64_t seed, std::uint64_t step,
             std::uint32_t time_offset, const py::handle& row_ids, bool keep_reserve, const py::handle& resets) {
            RunInputs in = n.inputs(x, h0, c0, lengths, row_ids, batch_first, resets);
            in.mode = parse_run_mode(mode);
            in.seed = seed;
            in.step = step;
            in.time_offset = time_offset;
            return n.forward(in, keep_reserve);
          },
          py::arg("x"), py::arg("h0") = py::none(), py::arg("c0") = py::none(), py::arg("lengths") = py::none(),
          py::arg("batch_first") = false, py::arg("mode") = "inference", py::arg("seed") = 0, py::arg("step") = 0,
          py::arg("time_offset") = 0, py::arg("row_ids") = py::none(), py::arg("keep_reserve") = false,
          py::arg("resets") = py::none())
      .def(
          "backward",
          [](Net& n, const py::handle& x, const py::handle& reserve, const py::handle& dy, const py::handle& dhy,
             const py::handle& dcy, const py::handle& h0, const py::handle& c0, const py::handle& lengths,
             bool batch_first, const std::string& mode, std::uint64_t seed, std::uint64_t step,
             std::uint32_t time_offset, const py::handle& row_ids, const py::handle& resets, bool need_dx) {
            RunInputs in = n.inputs(x, h0, c0, lengths, row_ids, batch_first, resets);
            in.mode = parse_run_mode(mode);
            in.seed = seed;
            in.step = step;
            in.time_offset = time_offset;
            return n.backward(in, reserve, dy, dhy, dcy, need_dx);
          },
          py::arg("x"), py::arg("reserve"), py::arg("dy") = py::none(), py::arg("dhy") = py::none(),
          py::arg("dcy") = py::none(), py::arg("h0") = py::none(), py::arg("c0") = py::none(),
          py::arg("lengths") = py::none(), py::arg("batch_first") = false, py::arg("mode") = "inference",
          py::arg("seed") = 0, py::arg("step") = 0, py::arg("time_offset") = 0, py::arg("row_ids") = py::none(),
          py::arg("resets") = py::none(), py::arg("need_dx") = true);
  bind_tensor_runs(net);
}
