#include "runnel/ops/cuda/cublas_api.hpp"

#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace runnel {
namespace {

std::atomic<const cublas_api*> loaded{nullptr};

template <class F> void resolve(void* lib, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(::dlsym(lib, name));
  if (!f)
    missing += std::string(missing.empty() ? "" : ", ") + name;
}

result<const cublas_api*> load() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::vector<std::string> tried = {soname};
#ifdef RUNNEL_CUDA_LIBDIR
  tried.push_back(std::string(RUNNEL_CUDA_LIBDIR) + "/" + soname);
#endif
  void* lib = nullptr;
  std::string why;
  for (auto& file : tried) {
    lib = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      why.clear();
      break;
    }
    const char* e = ::dlerror();
    why += std::string(why.empty() ? "" : "; ") + (e ? e : file + ": not found");
  }
  if (!lib)
    return unavailable("cannot load cuBLAS (" + soname + ") for the GPU kernels: " + why +
                       " (put its folder on LD_LIBRARY_PATH)");
  auto api = std::make_unique<cublas_api>();
  std::string missing;
  resolve(lib, "cublasCreate_v2", api->create, missing);
  resolve(lib, "cublasDestroy_v2", api->destroy, missing);
  resolve(lib, "cublasSetStream_v2", api->set_stream, missing);
  resolve(lib, "cublasSetWorkspace_v2", api->set_workspace, missing);
  resolve(lib, "cublasSgemm_v2", api->sgemm, missing);
  resolve(lib, "cublasGemmEx", api->gemm_ex, missing);
  resolve(lib, "cublasGetStatusString", api->status_string, missing);
  char path[4096] = {};
  if (::dlinfo(lib, RTLD_DI_ORIGIN, path) == 0)
    api->path = std::string(path) + "/" + soname;
  else
    api->path = soname;
  if (!missing.empty()) {
    ::dlclose(lib);
    return unavailable(api->path + " lacks " + missing + " (a cuBLAS older than the headers " +
                       "Runnel was built with, " + std::to_string(CUBLAS_VER_MAJOR) + ".x?)");
  }
  return api.release(); // loaded for the life of the process, like a linked library
}

} // namespace

result<const cublas_api*> load_cublas() {
  static const result<const cublas_api*> outcome = [] {
    auto r = load();
    if (r)
      loaded = *r;
    return r;
  }();
  return outcome;
}

const cublas_api& cublas() {
  return *loaded;
}

bool cublas_loaded() {
  return loaded != nullptr;
}

} // namespace runnel
