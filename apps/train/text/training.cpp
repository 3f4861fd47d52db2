#include "runnel/apps/train/text/training.hpp"

#include <cstdio>
#include <optional>

#include "runnel/ops/grad/gradients.hpp"
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

operation clipped_update(optimizer& opt, output loss, double clip, const graph_variable& step) {
  auto grads = opt.compute_gradients(loss);
  std::vector<gradient_value> values;
  for (auto& gv : grads)
    values.push_back(gv.first);
  auto clipped = clip_by_global_norm(values, clip).first;
  for (size_t i = 0; i < grads.size(); ++i)
    grads[i].first = clipped[i];
  return opt.apply_gradients(grads, &step);
}

epoch_counter::epoch_counter(graph& g) {
  var_ = variable(g, constant(g, tensor::vector<int64_t>({0, 0})), "epochs_done", false);
  value_ = placeholder(g, dtype::i64, shape{2}, "epochs_done_value");
  set_ = assign(var_, value_);
}

void epoch_counter::load(session& s) {
  auto t = s.run({}, {var_.value}).value()[0];
  epochs_ = int(t.data<int64_t>()[0]);
  start_ = t.data<int64_t>()[1];
}

void epoch_counter::finish_epoch(session& s, int64_t global_step) {
  (void)s.run({{value_, tensor::vector<int64_t>({epochs_ + 1, global_step})}}, {}, {set_}).value();
  ++epochs_;
  start_ = global_step;
}

} // namespace runnel::apps
