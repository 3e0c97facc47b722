// torch_abi.hpp: libtorch's stable C ABI, declared here from its documented signatures (every call
// returns an int32 error code, 0 on success; a tensor is an opaque handle that the caller deletes).
#include "torch_abi.hpp"

#if defined(_WIN32)
#define RNNCORE_NO_DLSYM 1
#else
#include <dlfcn.h>
#endif

namespace rnncore_py {
namespace {

struct AtenTensor;  // libtorch's AtenTensorOpaque: an at::Tensor behind a pointer
using Handle = AtenTensor*;
using Error = std::int32_t;

// The functions, by the names libtorch exports.
struct Abi {
  std::int32_t (*dtype_float32)();
  std::int32_t (*dtype_float64)();
  std::int32_t (*dtype_uint8)();
  std::int32_t (*device_type_cpu)();
  Error (*from_pyobject)(void* py_obj, Handle* ret);               // torch_tensor_from_pyobject (new handle)
  Error (*to_pyobject)(Handle t, void* py_type, void** ret);       // torch_tensor_to_pyobject (new reference)
  Error (*delete_tensor)(Handle t);                                // aoti_torch_delete_tensor_object
  Error (*get_data_ptr)(Handle t, void** ret);
  Error (*get_dim)(Handle t, std::int64_t* ret);
  Error (*get_sizes)(Handle t, std::int64_t** ret);               // borrowed from the tensor
  Error (*get_dtype)(Handle t, std::int32_t* ret);
  Error (*get_device_type)(Handle t, std::int32_t* ret);
  Error (*is_contiguous)(Handle t, bool* ret);
  Error (*empty_strided)(std::int64_t ndim, const std::int64_t* sizes, const std::int64_t* strides,
                         std::int32_t dtype, std::int32_t device_type, std::int32_t device_index, Handle* ret);
};

Abi g_abi;
bool g_on = false;
std::int32_t g_dtype[3];  // the codes of AbiDType's dtypes
std::int32_t g_cpu;

#if !defined(RNNCORE_NO_DLSYM)
template <typename F>
bool find(void* lib, const char* name, F* out) {
  void* p = dlsym(lib, name);
  *out = reinterpret_cast<F>(p);
  return p != nullptr;
}
#endif

// Deletes a handle at the end of a scope.
struct Owned {
  Handle h = nullptr;
  ~Owned() {
    if (h != nullptr) g_abi.delete_tensor(h);
  }
};

}  // namespace

bool torch_abi_load(const char* library) {
  g_on = false;
#if defined(RNNCORE_NO_DLSYM)
  (void)library;
  return false;
#else
  // RTLD_NOLOAD: only a libtorch that torch has loaded (the handle is kept, as the library stays).
  void* lib = library != nullptr ? dlopen(library, RTLD_NOW | RTLD_NOLOAD) : RTLD_DEFAULT;
  if (lib == nullptr) return false;
  Abi a{};
  const bool all = find(lib, "aoti_torch_dtype_float32", &a.dtype_float32) &&
                   find(lib, "aoti_torch_dtype_float64", &a.dtype_float64) &&
                   find(lib, "aoti_torch_dtype_uint8", &a.dtype_uint8) &&
                   find(lib, "aoti_torch_device_type_cpu", &a.device_type_cpu) &&
                   find(lib, "torch_tensor_from_pyobject", &a.from_pyobject) &&
                   find(lib, "torch_tensor_to_pyobject", &a.to_pyobject) &&
                   find(lib, "aoti_torch_delete_tensor_object", &a.delete_tensor) &&
                   find(lib, "aoti_torch_get_data_ptr", &a.get_data_ptr) &&
                   find(lib, "aoti_torch_get_dim", &a.get_dim) && find(lib, "aoti_torch_get_sizes", &a.get_sizes) &&
                   find(lib, "aoti_torch_get_dtype", &a.get_dtype) &&
                   find(lib, "aoti_torch_get_device_type", &a.get_device_type) &&
                   find(lib, "aoti_torch_is_contiguous", &a.is_contiguous) &&
                   find(lib, "aoti_torch_empty_strided", &a.empty_strided);
  if (!all) return false;
  g_abi = a;
  g_dtype[static_cast<int>(AbiDType::f32)] = a.dtype_float32();
  g_dtype[static_cast<int>(AbiDType::f64)] = a.dtype_float64();
  g_dtype[static_cast<int>(AbiDType::u8)] = a.dtype_uint8();
  g_cpu = a.device_type_cpu();
  // One round trip, so that a libtorch whose Python side is missing (the conversions live in
  // libtorch_python) is found out here and not at a run.
  void* data = nullptr;
  const std::int64_t one = 1;
  g_on = true;
  PyObject* t = abi_new_tensor(&one, 1, AbiDType::f32, &data);
  TensorFacts f;
  g_on = t != nullptr && abi_tensor_facts(t, &f) && f.data == data && f.cpu && f.dtype_is[0];
  Py_XDECREF(t);
  return g_on;
#endif
}

void torch_abi_disable() { g_on = false; }

bool torch_abi_on() { return g_on; }

bool abi_tensor_facts(PyObject* t, TensorFacts* f) {
  if (!g_on) return false;
  Owned h;
  if (g_abi.from_pyobject(t, &h.h) != 0) {
    PyErr_Clear();
    return false;
  }
  std::int64_t ndim = 0;
  std::int64_t* sizes = nullptr;
  std::int32_t dtype = 0, device = 0;
  if (g_abi.get_dim(h.h, &ndim) != 0 || ndim > kMaxDims || g_abi.get_sizes(h.h, &sizes) != 0 ||
      g_abi.get_dtype(h.h, &dtype) != 0 || g_abi.get_device_type(h.h, &device) != 0 ||
      g_abi.is_contiguous(h.h, &f->contiguous) != 0 || g_abi.get_data_ptr(h.h, &f->data) != 0)
    return false;
  f->ndim = static_cast<int>(ndim);
  for (int i = 0; i < f->ndim; ++i) f->sizes[i] = sizes[i];
  f->cpu = device == g_cpu;
  for (int i = 0; i < 3; ++i) f->dtype_is[i] = dtype == g_dtype[i];
  return true;
}

PyObject* abi_new_tensor(const std::int64_t* shape, int ndim, AbiDType dtype, void** data) {
  if (!g_on || ndim > kMaxDims) return nullptr;
  std::int64_t strides[kMaxDims];
  std::int64_t s = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i] > 1 ? shape[i] : 1;
  }
  Owned h;
  if (g_abi.empty_strided(ndim, shape, strides, g_dtype[static_cast<int>(dtype)], g_cpu, 0, &h.h) != 0 ||
      g_abi.get_data_ptr(h.h, data) != 0)
    return nullptr;
  void* obj = nullptr;
  if (g_abi.to_pyobject(h.h, nullptr, &obj) != 0 || obj == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  return static_cast<PyObject*>(obj);
}

}  // namespace rnncore_py
