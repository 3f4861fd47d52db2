#include "runnel/apps/train/text/corpus.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "runnel/storage/example.hpp"
#include "runnel/storage/record_file.hpp"

namespace runnel::apps {

std::vector<std::string> default_books() {
  return {"/usr/share/gocode/src/github.com/colinmarc/hdfs/testdata/mobydick.txt",
          "/usr/share/gocode/src/github.com/jdkato/prose/testdata/sherlock.txt"};
}

std::vector<std::string> tokenize(const std::string& text) {
  std::vector<std::string> out;
  std::string w;
  auto flush = [&] {
    while (!w.empty() && w.back() == '\'')
      w.pop_back();
    if (!w.empty())
      out.push_back(w);
    w.clear();
  };
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalpha(c))
      w.push_back(char(std::tolower(c)));
    else if (c == '\'' && !w.empty())
      w.push_back('\'');
    else
      flush();
  }
  flush();
  return out;
}

result<std::vector<std::string>> read_words(const std::vector<std::string>& files) {
  std::vector<std::string> all;
  for (auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in)
      return not_found("cannot read corpus file " + f +
                       " (the default books come from Debian's golang-github-colinmarc-hdfs-dev "
                       "and golang-github-jdkato-prose-dev; scripts/setup installs them)");
    std::stringstream ss;
    ss << in.rdbuf();
    auto words = tokenize(ss.str());
    if (words.empty())
      return invalid_argument("corpus file " + f + " holds no words");
    all.insert(all.end(), words.begin(), words.end());
  }
  return all;
}

int64_t vocabulary::find(const std::string& w) const {
  auto it = ids.find(w);
  return it == ids.end() ? -1 : it->second;
}

vocabulary build_vocabulary(const std::vector<std::string>& words, int64_t min_count) {
  std::unordered_map<std::string, int64_t> counts;
  for (auto& w : words)
    ++counts[w];
  std::vector<std::pair<std::string, int64_t>> kept;
  for (auto& [w, c] : counts)
    if (c >= min_count)
      kept.emplace_back(w, c);
  std::sort(kept.begin(), kept.end(), [](auto& a, auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  vocabulary v;
  for (auto& [w, c] : kept) {
    v.ids[w] = int64_t(v.words.size());
    v.words.push_back(w);
    v.counts.push_back(c);
  }
  return v;
}

std::vector<int64_t> to_ids(const vocabulary& v, const std::vector<std::string>& words) {
  std::vector<int64_t> ids;
  ids.reserve(words.size());
  for (auto& w : words)
    if (int64_t id = v.find(w); id >= 0)
      ids.push_back(id);
  return ids;
}

status write_id_records(const std::string& path, const std::vector<int64_t>& ids, int64_t chunk) {
  if (chunk < 1)
    return invalid_argument("records of " + std::to_string(chunk) + " ids: must be positive");
  auto tmp = path + ".tmp";
  RUNNEL_ASSIGN_OR_RETURN(auto w, record_writer::open(tmp));
  for (size_t i = 0; i < ids.size(); i += size_t(chunk)) {
    feature f;
    f.kind = feature_kind::int64s;
    f.int64s.assign(ids.begin() + long(i), ids.begin() + long(std::min(ids.size(), i + chunk)));
    RUNNEL_RETURN_IF_ERROR(w.write(encode_example({{"ids", f}})));
  }
  RUNNEL_RETURN_IF_ERROR(w.close());
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return data_loss("cannot rename " + tmp + " to " + path);
  return {};
}

std::string fingerprint(const std::vector<std::string>& parts) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (auto& p : parts) {
    for (char c : p)
      h = (h ^ uint8_t(c)) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string(buf, 12);
}

} // namespace runnel::apps
