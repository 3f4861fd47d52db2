#pragma once
// cuBLAS, loaded with dlopen when the first GPU context is made. Linking libcublas costs every
// process that has it 0.5–1 s at start-up (its initialisers run whether or not a GPU is there),
// and every Runnel program — each CLI call, each runnel-node — paid it (docs/gpu.md). cuDNN
// loads its parts lazily by itself and stays linked.
//
//   RUNNEL_ASSIGN_OR_RETURN(const cublas_api* api, load_cublas());
//   api->create(&handle);
//   ...
//   cublas().gemm_ex(handle, ...);   // once loaded (a kernel has a handle only then)
#include <cublas_v2.h>

#include "runnel/ops/core/status.hpp"

namespace runnel {

struct cublas_api {
  using gemm_ex_fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  gemm_ex_fn gemm_ex = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string path; ///< the file it was loaded from
};

/// Loads libcublas.so.<major of the headers> once: from the loader's search path
/// (LD_LIBRARY_PATH, ld.so.cache), else from the toolkit's folder found at build time. The error
/// names the library, where it was looked for and what the loader said.
result<const cublas_api*> load_cublas();

/// The loaded functions; only after load_cublas() succeeded (every cuBLAS handle comes after).
const cublas_api& cublas();

/// Whether load_cublas() has loaded it in this process.
bool cublas_loaded();

} // namespace runnel
