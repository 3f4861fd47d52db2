// HDF5 checkpoint restore on hostile files: listing, reading some and all datasets, the global
// step. Runs in the fuzzer's own process (for coverage); libhdf5's own memory errors on some
// inputs are told apart from ours by scripts/fuzz (docs/reliability.md), and a training process
// reads checkpoints through verify_checkpoint_isolated first.
#include "runnel/storage/checkpoint.hpp"
#include "runnel/tests/fuzz/fuzz_util.hpp"

using namespace runnel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_path(".h5");
  fuzz::write_file(path, data, size);
  if (auto l = list_checkpoint(path); l.ok() && !l->empty())
    (void)read_checkpoint_tensors(path, {l->front().name});
  (void)read_checkpoint(path);
  (void)read_checkpoint_global_step(path);
  return 0;
}
