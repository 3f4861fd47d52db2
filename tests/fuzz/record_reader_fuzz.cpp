// The TFRecord reader on hostile files: raw, GZIP, ZLIB and automatic detection, skipping
// corrupt records or not, and the index sidecar. The first input byte picks the mode.
#include <cstdio>

#include "runnel/storage/record_file.hpp"
#include "runnel/storage/record_index.hpp"
#include "runnel/tests/fuzz/fuzz_util.hpp"

using namespace runnel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  static const std::string path = fuzz::scratch_path(".tfrecord");
  static const std::string good = fuzz::scratch_path("-good.tfrecord");
  uint8_t mode = data[0];
  ++data;
  --size;
  if ((mode & 7) == 7) {
    // The index sidecar of a small valid file.
    static bool made = false;
    if (!made) {
      auto w = record_writer::open(good).value();
      for (int i = 0; i < 3; ++i)
        (void)w.write("record " + std::to_string(i));
      (void)w.close();
      made = true;
    }
    fuzz::write_file(record_index_path(good), data, size);
    auto idx = read_record_index(good);
    if (idx) {
      auto r = record_reader::open(good).value();
      for (auto off : idx->offsets)
        (void)r.seek(off);
    }
    return 0;
  }
  fuzz::write_file(path, data, size);
  record_reader_options o;
  static const record_compression kinds[] = {record_compression::none, record_compression::gzip,
                                             record_compression::zlib,
                                             record_compression::automatic};
  o.compression = kinds[mode & 3];
  o.skip_corrupt = (mode & 4) != 0;
  auto r = record_reader::open(path, o);
  if (!r)
    return 0;
  std::string rec;
  for (int i = 0; i < 10000; ++i) {
    auto more = r->next(rec);
    if (!more || !*more)
      break;
  }
  return 0;
}
