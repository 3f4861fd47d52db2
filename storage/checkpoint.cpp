#include "runnel/storage/checkpoint.hpp"
#include "runnel/ops/core/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>

extern char** environ;

namespace runnel {
namespace {

/// Closes an HDF5 handle when it goes out of scope.
class h5_handle {
public:
  h5_handle() = default;
  h5_handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  h5_handle(const h5_handle&) = delete;
  h5_handle& operator=(const h5_handle&) = delete;
  h5_handle(h5_handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  ~h5_handle() {
    if (id_ >= 0 && close_)
      close_(id_);
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

/// Silences HDF5's automatic error printing: errors become status values with our messages.
struct quiet_errors {
  quiet_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};
void quiet() {
  static quiet_errors q;
}

hid_t native_type(dtype t) {
  switch (t) {
    case dtype::f32:
      return H5T_NATIVE_FLOAT;
    case dtype::f64:
      return H5T_NATIVE_DOUBLE;
    case dtype::i8:
      return H5T_NATIVE_INT8;
    case dtype::u8:
      return H5T_NATIVE_UINT8;
    case dtype::boolean:
      return H5T_NATIVE_UINT8;
    case dtype::i32:
      return H5T_NATIVE_INT32;
    case dtype::i64:
      return H5T_NATIVE_INT64;
    case dtype::f16:
    case dtype::bf16:
      return H5T_NATIVE_UINT16;
    default:
      return -1;
  }
}

status write_string_attr(hid_t obj, const char* key, const std::string& value) {
  h5_handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.size() + 1);
  h5_handle space(H5Screate(H5S_SCALAR), H5Sclose);
  h5_handle attr(H5Acreate2(obj, key, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok() || H5Awrite(attr.get(), type.get(), value.c_str()) < 0)
    return internal_error(std::string("cannot write attribute ") + key);
  return {};
}

template <class T> status write_scalar_attr(hid_t obj, const char* key, hid_t type, T value) {
  h5_handle space(H5Screate(H5S_SCALAR), H5Sclose);
  h5_handle attr(H5Acreate2(obj, key, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok() || H5Awrite(attr.get(), type, &value) < 0)
    return internal_error(std::string("cannot write attribute ") + key);
  return {};
}

std::optional<std::string> read_string_attr(hid_t obj, const char* key,
                                            size_t max_bytes = size_t(1) << 20) {
  if (H5Aexists(obj, key) <= 0)
    return std::nullopt;
  h5_handle attr(H5Aopen(obj, key, H5P_DEFAULT), H5Aclose);
  h5_handle type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING)
    return std::nullopt;
  if (H5Tis_variable_str(type.get()) > 0) {
    char* s = nullptr;
    h5_handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    // The file's character set (h5py writes str attributes as UTF-8): HDF5 does not convert
    // between ASCII and UTF-8, it fails the read.
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    if (H5Aread(attr.get(), mem.get(), &s) < 0 || !s)
      return std::nullopt;
    std::string out(s);
    H5free_memory(s);
    return out;
  }
  size_t n = H5Tget_size(type.get());
  if (n == 0 || n > max_bytes)
    return std::nullopt; // no attribute of ours is that long: a damaged file
  std::string buf(n, '\0');
  if (H5Aread(attr.get(), type.get(), buf.data()) < 0)
    return std::nullopt;
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

status write_dataset(hid_t file, const std::string& name, const tensor& t) {
  std::vector<hsize_t> dims(t.shape().dims().begin(), t.shape().dims().end());
  h5_handle space(t.rank() == 0 ? H5Screate(H5S_SCALAR)
                                : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
                  H5Sclose);
  h5_handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  std::string path = "/" + name + ":0";
  if (t.type() == dtype::string) {
    h5_handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), H5T_VARIABLE);
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
    h5_handle ds(H5Dcreate2(file, path.c_str(), type.get(), space.get(), lcpl.get(), H5P_DEFAULT,
                            H5P_DEFAULT),
                 H5Dclose);
    if (!ds.ok())
      return internal_error("cannot create dataset " + path);
    std::vector<const char*> ptrs;
    for (auto& s : t.flat<std::string>())
      ptrs.push_back(s.c_str());
    if (H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) < 0)
      return internal_error("cannot write dataset " + path);
    return write_string_attr(ds.get(), "dtype", std::string(runnel::name(t.type())));
  }
  hid_t type = native_type(t.type());
  if (type < 0)
    return unimplemented("cannot store dtype " + std::string(runnel::name(t.type())));
  h5_handle ds(
      H5Dcreate2(file, path.c_str(), type, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose);
  if (!ds.ok())
    return internal_error("cannot create dataset " + path + " (is the name used twice?)");
  if (t.num_elements() > 0 &&
      H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw_data()) < 0)
    return internal_error("cannot write dataset " + path);
  return write_string_attr(ds.get(), "dtype", std::string(runnel::name(t.type())));
}

/// The Runnel dtype of a dataset: its `dtype` attribute, else mapped from its HDF5 type.
result<dtype> dataset_dtype(hid_t ds, const std::string& path) {
  if (auto attr = read_string_attr(ds, "dtype"))
    return parse_dtype(*attr);
  h5_handle type(H5Dget_type(ds), H5Tclose);
  auto cls = H5Tget_class(type.get());
  size_t size = H5Tget_size(type.get());
  if (cls == H5T_FLOAT)
    return size == 8 ? dtype::f64 : size == 4 ? dtype::f32 : dtype::f16;
  if (cls == H5T_INTEGER) {
    bool is_signed = H5Tget_sign(type.get()) == H5T_SGN_2;
    if (size == 8)
      return dtype::i64;
    if (size == 4)
      return dtype::i32;
    if (size == 1)
      return is_signed ? dtype::i8 : dtype::u8;
  }
  if (cls == H5T_STRING)
    return dtype::string;
  if (cls == H5T_ENUM && size == 1)
    return dtype::boolean; // h5py's bool
  return unimplemented("dataset " + path + " has an HDF5 type Runnel cannot map");
}

result<shape> dataset_shape(hid_t ds) {
  h5_handle space(H5Dget_space(ds), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0)
    return internal_error("cannot read the dataspace");
  if (rank > 32) // HDF5's own limit
    return data_loss("dataspace of rank " + std::to_string(rank));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
    return data_loss("cannot read the dataspace's dimensions");
  std::vector<int64_t> out;
  for (auto d : dims) {
    if (d > hsize_t(shape::max_elements))
      return data_loss("dimension " + std::to_string(d) + " is larger than 2^40");
    out.push_back(int64_t(d));
  }
  shape s(std::move(out));
  RUNNEL_RETURN_IF_ERROR(s.checked_num_elements().error());
  return s;
}

/// Checks that a dataset of `s` elements of `t` can be in a file of `file_bytes` before anything
/// is allocated for it: a contiguous dataset's bytes are in the file; a chunked (compressed) one
/// may expand, at most 1024-fold (zeros compress about that well), or to 64 MiB.
status check_dataset_size(hid_t ds, dtype t, const shape& s, uint64_t file_bytes,
                          const std::string& path) {
  uint64_t elem = t == dtype::string ? 1 : size_of(t);
  uint64_t bytes = uint64_t(s.num_elements()) * elem; // <= 2^40 * 16: no overflow
  h5_handle dcpl(H5Dget_create_plist(ds), H5Pclose);
  bool chunked = dcpl.ok() && H5Pget_layout(dcpl.get()) == H5D_CHUNKED;
  uint64_t limit = chunked ? std::max<uint64_t>(file_bytes * 1024, uint64_t(64) << 20)
                           : file_bytes;
  if (bytes > limit)
    return data_loss("dataset " + path + " announces " + s.to_string() + " " +
                     std::string(name(t)) + " (" + std::to_string(bytes) +
                     " bytes), more than its file of " + std::to_string(file_bytes) +
                     " bytes can hold (corrupt file?)");
  return {};
}

/// Whether `path` names an existing object, checking each group on the way (H5Lexists fails
/// on a path whose intermediate groups are missing).
bool path_exists(hid_t file, const std::string& path) {
  size_t pos = 0;
  while ((pos = path.find('/', pos + 1)) != std::string::npos)
    if (H5Lexists(file, path.substr(0, pos).c_str(), H5P_DEFAULT) <= 0)
      return false;
  return H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0;
}

/// A variable `name` is dataset `name:0`; a dataset written by others is found by its own name.
result<tensor> read_dataset(hid_t file, const std::string& name, const std::string& file_path) {
  std::string path = "/" + name + ":0";
  if (!path_exists(file, path))
    path = "/" + name;
  if (!path_exists(file, path))
    return not_found("variable '" + name + "' is not in checkpoint " + file_path);
  h5_handle ds(H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok())
    return data_loss("cannot open dataset " + path + " in " + file_path);
  RUNNEL_ASSIGN_OR_RETURN(dtype t, dataset_dtype(ds.get(), path));
  auto sr = dataset_shape(ds.get());
  if (!sr)
    return sr.error().with_context("dataset " + path + " in " + file_path);
  shape s = *sr;
  hsize_t file_bytes = 0;
  H5Fget_filesize(file, &file_bytes);
  RUNNEL_RETURN_IF_ERROR(check_dataset_size(ds.get(), t, s, file_bytes, path)
                             .with_context(file_path));
  tensor out;
  try {
    out = tensor(t, s);
  } catch (const std::exception& e) {
    return resource_exhausted("cannot allocate " + s.to_string() + " " + std::string(runnel::name(t)) +
                              " for dataset " + path + " in " + file_path + ": " + e.what());
  }
  if (t == dtype::string) {
    h5_handle file_type(H5Dget_type(ds.get()), H5Tclose);
    if (H5Tis_variable_str(file_type.get()) <= 0)
      return unimplemented("dataset " + path +
                           " holds fixed-length strings, which Runnel "
                           "does not read yet");
    h5_handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(file_type.get()));
    std::vector<char*> ptrs(static_cast<size_t>(out.num_elements()), nullptr);
    if (!ptrs.empty() &&
        H5Dread(ds.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) < 0)
      return data_loss("cannot read dataset " + path + " in " + file_path);
    auto dst = out.flat<std::string>();
    for (size_t i = 0; i < ptrs.size(); ++i) {
      dst[i] = ptrs[i] ? ptrs[i] : "";
      H5free_memory(ptrs[i]);
    }
    return out;
  }
  hid_t mem = native_type(t);
  if (out.num_elements() > 0 &&
      H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.raw_data()) < 0)
    return data_loss("cannot read dataset " + path + " in " + file_path +
                     " (truncated or corrupt file?)");
  return out;
}

result<h5_handle> open_file(const std::string& path) {
  quiet();
  if (::access(path.c_str(), R_OK) != 0)
    return not_found("cannot open checkpoint " + path + ": " + std::strerror(errno));
  if (H5Fis_hdf5(path.c_str()) <= 0)
    return data_loss(path + " is not an HDF5 file (or it is truncated)");
  h5_handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.ok())
    return data_loss("cannot open checkpoint " + path + " (corrupt or truncated HDF5 file)");
  return f;
}

herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* data) {
  if (info->type == H5O_TYPE_DATASET)
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}

/// The variable name of a dataset path: without the ":0" Runnel appends.
std::string variable_name_of(const std::string& dataset) {
  if (dataset.size() > 2 && dataset.compare(dataset.size() - 2, 2, ":0") == 0)
    return dataset.substr(0, dataset.size() - 2);
  return dataset;
}

result<std::vector<std::string>> dataset_names(hid_t file) {
  std::vector<std::string> names;
  if (H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &names) < 0)
    return data_loss("cannot walk the file's groups");
  return names;
}

} // namespace

status write_checkpoint(const std::string& path, const std::map<std::string, tensor>& tensors,
                        std::optional<int64_t> global_step) {
  quiet();
  std::string tmp = path + ".tmp";
  {
    h5_handle f(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!f.ok())
      return unavailable("cannot create " + tmp + ": " + std::strerror(errno));
    auto fail = [&](status s) {
      ::unlink(tmp.c_str());
      return s.with_context("writing checkpoint " + path);
    };
    for (auto& [name, t] : tensors) {
      if (name.empty() || name.front() == '/')
        return fail(invalid_argument("bad variable name '" + name + "'"));
      status s = write_dataset(f.get(), name, t);
      if (!s.ok())
        return fail(s);
    }
    status s =
        write_scalar_attr(f.get(), "format_version", H5T_NATIVE_INT32, checkpoint_format_version);
    if (s.ok() && global_step)
      s = write_scalar_attr(f.get(), "global_step", H5T_NATIVE_INT64, *global_step);
    if (s.ok())
      s = write_string_attr(f.get(), "creator", "runnel");
    if (!s.ok())
      return fail(s);
    if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0)
      return fail(unavailable("flushing failed"));
  }
  return commit_file_atomically(tmp, path);
}

result<std::vector<checkpoint_entry>> list_checkpoint(const std::string& path) {
  RUNNEL_ASSIGN_OR_RETURN(auto f, open_file(path));
  RUNNEL_ASSIGN_OR_RETURN(auto names, dataset_names(f.get()));
  std::vector<checkpoint_entry> out;
  for (auto& n : names) {
    h5_handle ds(H5Dopen2(f.get(), ("/" + n).c_str(), H5P_DEFAULT), H5Dclose);
    if (!ds.ok())
      return data_loss("cannot open dataset /" + n + " in " + path);
    RUNNEL_ASSIGN_OR_RETURN(shape s, dataset_shape(ds.get()));
    // A dataset of a type Runnel cannot read (compound, enum, complex...) is listed as such
    // rather than failing the whole listing.
    auto t = dataset_dtype(ds.get(), "/" + n);
    out.push_back({variable_name_of(n), t ? *t : dtype::invalid, s,
                   t ? std::string() : t.error().message()});
  }
  return out;
}

result<checkpoint_contents> read_checkpoint(const std::string& path) {
  RUNNEL_ASSIGN_OR_RETURN(auto f, open_file(path));
  RUNNEL_ASSIGN_OR_RETURN(auto names, dataset_names(f.get()));
  checkpoint_contents c;
  for (auto& n : names) {
    auto var = variable_name_of(n);
    RUNNEL_ASSIGN_OR_RETURN(tensor t, read_dataset(f.get(), var, path));
    c.tensors.emplace(var, std::move(t));
  }
  if (H5Aexists(f.get(), "global_step") > 0) {
    h5_handle a(H5Aopen(f.get(), "global_step", H5P_DEFAULT), H5Aclose);
    int64_t step = 0;
    if (H5Aread(a.get(), H5T_NATIVE_INT64, &step) >= 0)
      c.global_step = step;
  }
  if (H5Aexists(f.get(), "format_version") > 0) {
    h5_handle a(H5Aopen(f.get(), "format_version", H5P_DEFAULT), H5Aclose);
    H5Aread(a.get(), H5T_NATIVE_INT32, &c.format_version);
  }
  return c;
}

result<std::map<std::string, tensor>>
read_checkpoint_tensors(const std::string& path, const std::vector<std::string>& names) {
  RUNNEL_ASSIGN_OR_RETURN(auto f, open_file(path));
  std::map<std::string, tensor> out;
  for (auto& n : names) {
    RUNNEL_ASSIGN_OR_RETURN(tensor t, read_dataset(f.get(), n, path));
    out.emplace(n, std::move(t));
  }
  return out;
}

status verify_checkpoint(const std::string& path) {
  RUNNEL_ASSIGN_OR_RETURN(auto f, open_file(path));
  RUNNEL_ASSIGN_OR_RETURN(auto names, dataset_names(f.get()));
  for (auto& n : names) {
    auto t = read_dataset(f.get(), variable_name_of(n), path);
    if (!t)
      return t.error();
  }
  return {};
}

namespace {

constexpr const char* verifier_variable = "RUNNEL_VERIFY_CHECKPOINT_CHILD";

// The verifier child: this program executed again with the variable naming a checkpoint. It
// reads the file and exits with the answer before main runs (a fresh process image: none of the
// parent's threads, locks or allocator state, which a child of fork() without exec inherits
// half-taken and can hang on).
[[maybe_unused]] const bool verifier_child = [] {
  const char* path = std::getenv(verifier_variable);
  if (!path)
    return false;
  status s = verify_checkpoint(path);
  std::_Exit(s.ok() ? 0 : 3); // no atexit handlers, no static destructors
}();

} // namespace

status verify_checkpoint_isolated(const std::string& path, std::chrono::milliseconds timeout) {
  std::fflush(nullptr);
  // The same program, executed again (posix_spawn: safe from a threaded process), told by its
  // environment to verify `path` (see verifier_child).
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, verifier_variable, std::strlen(verifier_variable)) != 0)
      env_strings.emplace_back(*e);
  env_strings.push_back(std::string(verifier_variable) + "=" + path);
  std::vector<char*> envp;
  for (auto& s : env_strings)
    envp.push_back(s.data());
  envp.push_back(nullptr);
  char arg0[] = "runnel-verify-checkpoint";
  char* argv[] = {arg0, nullptr};
  pid_t pid = 0;
  if (int e = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()); e != 0)
    return unavailable("cannot start a process to verify " + path + ": " + std::strerror(e));
  // Wait for the child's exit with a deadline: a pidfd becomes readable when it exits.
  int wstatus = 0;
  int pidfd = int(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int r;
    do
      r = ::poll(&p, 1, int(timeout.count()));
    while (r < 0 && errno == EINTR);
    ::close(pidfd);
    if (r == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wstatus, 0);
      return data_loss("reading checkpoint " + path + " did not finish within " +
                       std::to_string(timeout.count()) + " ms (corrupt file?)");
    }
  }
  while (::waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR)
      return unavailable("waiting for the verifier of " + path + ": " + std::strerror(errno));
  }
  if (WIFSIGNALED(wstatus))
    return data_loss("reading checkpoint " + path + " crashed the HDF5 library (signal " +
                     std::to_string(WTERMSIG(wstatus)) + "): the file is corrupt");
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    // The child said no: read it here for the message (a clean error, not a crash).
    status s = verify_checkpoint(path);
    return s.ok() ? data_loss("checkpoint " + path + " failed verification") : s;
  }
  return {};
}

result<std::optional<int64_t>> read_checkpoint_global_step(const std::string& path) {
  RUNNEL_ASSIGN_OR_RETURN(auto f, open_file(path));
  std::optional<int64_t> out;
  if (H5Aexists(f.get(), "global_step") > 0) {
    h5_handle a(H5Aopen(f.get(), "global_step", H5P_DEFAULT), H5Aclose);
    int64_t step = 0;
    if (H5Aread(a.get(), H5T_NATIVE_INT64, &step) < 0)
      return data_loss("cannot read global_step of " + path);
    out = step;
  }
  return out;
}

result<std::optional<std::string>> read_root_string_attribute(const std::string& path,
                                                              const std::string& key) {
  RUNNEL_ASSIGN_OR_RETURN(auto f, open_file(path));
  if (H5Aexists(f.get(), key.c_str()) <= 0)
    return std::optional<std::string>();
  auto v = read_string_attr(f.get(), key.c_str(), size_t(64) << 20);
  if (!v)
    return data_loss(path + ": the root attribute '" + key +
                     "' is not a readable string (of at most 64 MiB)");
  return v;
}

namespace {

/// A path of a state file as the directory has it: TensorFlow writes absolute paths, which name
/// another machine's folder when the directory was copied; a missing absolute path whose file
/// name is in `dir` becomes that file name.
std::string local_checkpoint_path(const std::string& dir, const std::string& written) {
  namespace fs = std::filesystem;
  fs::path p(written);
  if (!p.is_absolute() || fs::exists(p) || fs::exists(written + ".index"))
    return written;
  auto name = p.filename().string();
  if (fs::exists(fs::path(dir) / name) || fs::exists(fs::path(dir) / (name + ".index")))
    return name;
  return written;
}

} // namespace

result<checkpoint_state> read_checkpoint_state(const std::string& dir) {
  std::string path = dir + "/checkpoint";
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f)
    return not_found("no checkpoint state file " + path + ": " + std::strerror(errno));
  checkpoint_state st;
  char line[4096];
  int number = 0;
  while (std::fgets(line, sizeof line, f)) {
    ++number;
    std::string l(line);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r'))
      l.pop_back();
    if (l.empty())
      continue;
    auto colon = l.find(':');
    auto key = colon == std::string::npos ? std::string() : l.substr(0, colon);
    bool path_key = key == "model_checkpoint_path" || key == "all_model_checkpoint_paths";
    // TensorFlow also writes numbers (all_model_checkpoint_timestamps: 1.6e+09, ...): skipped.
    if (!path_key && colon != std::string::npos)
      continue;
    auto q1 = l.find('"'), q2 = l.rfind('"');
    if (colon == std::string::npos || q1 == std::string::npos || q2 <= q1) {
      std::fclose(f);
      return data_loss(path + ":" + std::to_string(number) + ": expected 'key: \"value\"'");
    }
    auto value = local_checkpoint_path(dir, l.substr(q1 + 1, q2 - q1 - 1));
    if (key == "model_checkpoint_path")
      st.latest = value;
    else
      st.all.push_back(value);
  }
  std::fclose(f);
  if (st.latest.empty())
    return data_loss(path + " names no model_checkpoint_path");
  return st;
}

status write_checkpoint_state(const std::string& dir, const checkpoint_state& state) {
  std::string text = "model_checkpoint_path: \"" + state.latest + "\"\n";
  for (auto& a : state.all)
    text += "all_model_checkpoint_paths: \"" + a + "\"\n";
  return write_file_atomically(dir + "/checkpoint", text);
}

} // namespace runnel
