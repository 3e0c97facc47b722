// rnncore._core's tensors through libtorch's stable C ABI (torch >= 2.15): the few plain C functions
// that libtorch exports to read a torch.Tensor (data pointer, sizes, dtype, device) and to make one
// (empty_strided, then wrapped as a Python torch.Tensor), found at run time with dlsym in the libtorch
// that `import torch` loaded. The extension neither includes torch's headers nor links libtorch: the
// declarations in torch_abi.cpp are its own, and when a symbol is missing (an older torch) nothing is
// used and core.cpp reads and makes tensors through torch's Python API as before (rnncore.torch's
// kernel_path() says which).
#pragma once

#include <Python.h>

#include <cstdint>

namespace rnncore_py {

// Finds the functions in `library` (a path; already loaded by torch: it is not loaded again) or, with
// null, among the process's global symbols. True when all were found; then the tensor functions below
// use them until torch_abi_disable(). Call with the GIL held, after `import torch`.
bool torch_abi_load(const char* library);
void torch_abi_disable();
bool torch_abi_on();

enum class AbiDType { f32, f64, u8 };

// What a run reads of a tensor (sizes: up to kMaxDims dimensions).
constexpr int kMaxDims = 8;
struct TensorFacts {
  void* data = nullptr;
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  bool cpu = false, contiguous = false;
  bool dtype_is[3] = {};  // by AbiDType
};

// Reads the facts of torch.Tensor `t` (a subclass too). False when the ABI is off, `t` is not a
// tensor, it has more than kMaxDims dimensions or a call failed: the caller takes the Python path
// (which also words the errors).
bool abi_tensor_facts(PyObject* t, TensorFacts* facts);

// A new uninitialised contiguous CPU tensor (a new reference) and its memory; null when the ABI is
// off or a call failed (no Python error is left set): the caller takes the Python path.
PyObject* abi_new_tensor(const std::int64_t* shape, int ndim, AbiDType dtype, void** data);

}  // namespace rnncore_py
