#include "runnel/apps/train/text/training.hpp"

#include <cstdio>
#include <optional>

#include "runnel/storage/checkpoint.hpp"

namespace runnel::apps {

int64_t restore_or_initialize(session& s, saver& sv, graph& g, const std::string& dir,
                              bool resume) {
  std::optional<std::string> latest;
  if (resume)
    if (auto found = saver::latest_checkpoint(dir))
      latest = *found;
  if (!latest) {
    if (resume)
      std::fprintf(stderr, "no checkpoint in %s: starting from scratch\n", dir.c_str());
    throw_if_error(s.run({global_variables_initializer(g)}));
    return 0;
  }
  throw_if_error(sv.restore(s, *latest));
  int64_t step = read_checkpoint_global_step(*latest).value().value_or(0);
  std::fprintf(stderr, "resumed from %s (step %lld)\n", latest->c_str(),
               static_cast<long long>(step));
  return step;
}

} // namespace runnel::apps
