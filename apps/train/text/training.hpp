#pragma once
// What the text-model apps share around a training run.

#include <cstdint>
#include <string>

#include "runnel/actors/state/saver.hpp"
#include "runnel/actors/exec/session.hpp"

namespace runnel::apps {

/// With `resume` and a checkpoint in `dir`: restores it and returns its global step (saying so
/// on stderr); otherwise runs the graph's variable initializers and returns 0.
int64_t restore_or_initialize(session& s, saver& sv, graph& g, const std::string& dir,
                              bool resume);

} // namespace runnel::apps
