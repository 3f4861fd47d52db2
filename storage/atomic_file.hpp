#pragma once
// Writing a whole file so that readers see the old one or the new one, never half of either.
//
//   throw_if_error(write_file_atomically("model.pb", bytes));

#include <string>
#include <string_view>

#include "runnel/ops/status.hpp"

namespace runnel {

/// Writes `bytes` to `path + ".tmp"`, flushes it to the disk, then renames it over `path`. On an
/// error the temporary file is removed and the message names the file and the cause.
status write_file_atomically(const std::string& path, std::string_view bytes);

} // namespace runnel
