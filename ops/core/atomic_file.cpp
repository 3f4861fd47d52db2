#include "runnel/ops/core/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace runnel {
namespace {

status rename_over(const std::string& tmp, const std::string& path) {
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return unavailable("renaming " + tmp + " to " + path + " failed: " + std::strerror(err));
  }
  return {};
}

} // namespace

status write_file_atomically(const std::string& path, std::string_view bytes) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return unavailable("cannot write " + tmp + ": " + std::strerror(errno));
  auto fail = [&](const std::string& what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return unavailable(what + " " + tmp + " failed: " + std::strerror(err));
  };
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return fail("writing");
    }
    off += size_t(n);
  }
  if (::fsync(fd) != 0)
    return fail("flushing");
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return unavailable("closing " + tmp + " failed: " + std::strerror(errno));
  }
  return rename_over(tmp, path);
}

status commit_file_atomically(const std::string& tmp, const std::string& path) {
  int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    int err = errno;
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    return unavailable("flushing " + tmp + " failed: " + std::strerror(err));
  }
  ::close(fd);
  return rename_over(tmp, path);
}

} // namespace runnel
