#pragma once
// Writing a whole file so that readers see the old one or the new one, never half of either.
//
//   throw_if_error(write_file_atomically("model.pb", bytes));

#include <string>
#include <string_view>

#include "runnel/ops/core/status.hpp"

namespace runnel {

/// Writes `bytes` to `path + ".tmp"`, flushes it to the disk, then renames it over `path`. On an
/// error the temporary file is removed and the message names the file and the cause.
status write_file_atomically(const std::string& path, std::string_view bytes);
/// The end of the same for a file another writer made (an HDF5 library's): flushes `tmp` to the
/// disk and renames it over `path`; on an error `tmp` is removed.
status commit_file_atomically(const std::string& tmp, const std::string& path);

} // namespace runnel
