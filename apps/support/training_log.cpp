#include "runnel/apps/support/training_log.hpp"

#include <cstdio>

#include "runnel/storage/tf/events.hpp"

namespace runnel::apps {

training_log::training_log(const std::string& logdir, const std::string& run) {
  if (logdir.empty())
    return;
  auto w = summary_writer::open(run.empty() ? logdir : logdir + "/" + run);
  writer_ = std::make_unique<summary_writer>(std::move(w).value());
  std::fprintf(stderr, "TensorBoard log: %s (tensorboard --logdir %s)\n", writer_->path().c_str(),
               logdir.c_str());
}

training_log::~training_log() {
  if (writer_)
    (void)writer_->close();
}

void training_log::graph(const runnel::graph& g) {
  if (writer_)
    throw_if_error(writer_->add_graph(g));
}

void training_log::scalar(std::string_view tag, double value, int64_t step) {
  if (writer_)
    throw_if_error(writer_->add_scalar(tag, value, step));
}

void training_log::summary(const tensor& serialized, int64_t step) {
  if (writer_)
    throw_if_error(writer_->add_summary(serialized.flat<std::string>()[0], step));
}

void training_log::close() {
  if (writer_)
    throw_if_error(writer_->close());
}

} // namespace runnel::apps
