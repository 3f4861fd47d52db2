#include "runnel/apps/train/g2p/g2p_data.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <unordered_set>

#include "runnel/storage/example.hpp"
#include "runnel/storage/example_parse.hpp"
#include "runnel/storage/record_file.hpp"

namespace runnel::apps {

result<g2p_corpus> read_g2p_corpus(const std::string& path, int64_t max_letters) {
  std::ifstream in(path);
  if (!in)
    return not_found("cannot read the pronouncing dictionary " + path +
                     " (Debian's festlex-cmu; scripts/setup installs it)");
  g2p_corpus c;
  std::unordered_set<std::string> seen;
  std::set<char> letters;
  std::set<std::string> phones;
  std::vector<g2p_entry> all;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] != '(')
      continue; // the "MNCL" header
    size_t q1 = line.find('"'), q2 = line.find('"', q1 + 1);
    size_t body = line.find("(((", q2 == std::string::npos ? 0 : q2);
    if (q1 == std::string::npos || q2 == std::string::npos || body == std::string::npos)
      return invalid_argument(path + ":" + std::to_string(number) +
                              ": not a (\"word\" pos (((phones) stress) ...)) entry: " + line);
    g2p_entry e{line.substr(q1 + 1, q2 - q1 - 1), {}};
    bool plain = !e.word.empty() && int64_t(e.word.size()) <= max_letters;
    for (char ch : e.word)
      plain = plain && (std::islower(static_cast<unsigned char>(ch)) || ch == '\'');
    if (!plain || !seen.insert(e.word).second)
      continue; // other spellings (digits, capitals), long words, later pronunciations
    std::string token;
    for (size_t i = body; i <= line.size(); ++i) {
      char ch = i < line.size() ? line[i] : ' ';
      if (ch == '(' || ch == ')' || ch == ' ') {
        if (!token.empty() && !std::isdigit(static_cast<unsigned char>(token[0])))
          e.phones.push_back(token);
        token.clear();
      } else {
        token += ch;
      }
    }
    if (e.phones.empty())
      return invalid_argument(path + ":" + std::to_string(number) + ": '" + e.word +
                              "' has no phones");
    letters.insert(e.word.begin(), e.word.end());
    phones.insert(e.phones.begin(), e.phones.end());
    all.push_back(std::move(e));
  }
  if (all.size() < 40)
    return invalid_argument(path + ": only " + std::to_string(all.size()) +
                            " usable entries (lower-case words with phones)");
  for (char ch : letters)
    c.letters.push_back(std::string(1, ch));
  c.phones = {"<eos>", "<go>"};
  c.phones.insert(c.phones.end(), phones.begin(), phones.end());
  for (size_t i = 0; i < all.size(); ++i)
    (i % 20 == 19 ? c.test : c.train).push_back(std::move(all[i]));
  return c;
}

std::vector<int64_t> g2p_letter_ids(const g2p_corpus& c, const std::string& word) {
  std::vector<int64_t> ids;
  for (char ch : word) {
    auto it = std::find(c.letters.begin(), c.letters.end(), std::string(1, ch));
    if (it != c.letters.end())
      ids.push_back(int64_t(it - c.letters.begin()) + 1);
  }
  return ids;
}

std::vector<int64_t> g2p_phone_ids(const g2p_corpus& c, const std::vector<std::string>& phones) {
  std::vector<int64_t> ids;
  for (auto& p : phones)
    ids.push_back(
        int64_t(std::lower_bound(c.phones.begin() + 2, c.phones.end(), p) - c.phones.begin()));
  return ids;
}

status write_g2p_split(const std::string& path, const g2p_corpus& c,
                       const std::vector<g2p_entry>& entries) {
  auto tmp = path + ".tmp";
  RUNNEL_ASSIGN_OR_RETURN(auto w, record_writer::open(tmp));
  auto list = [](const std::vector<int64_t>& ids) {
    std::vector<feature> steps;
    for (auto id : ids) {
      feature f;
      f.kind = feature_kind::int64s;
      f.int64s = {id};
      steps.push_back(std::move(f));
    }
    return steps;
  };
  for (auto& e : entries) {
    sequence_example s;
    s.feature_lists["letters"] = list(g2p_letter_ids(c, e.word));
    s.feature_lists["phones"] = list(g2p_phone_ids(c, e.phones));
    RUNNEL_RETURN_IF_ERROR(w.write(encode_sequence_example(s)));
  }
  RUNNEL_RETURN_IF_ERROR(w.close());
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return data_loss("cannot rename " + tmp + " to " + path);
  return {};
}

map_fn g2p_parse_entry() {
  std::vector<feature_spec> specs{{.key = "letters", .type = dtype::i64, .shape = {}},
                                  {.key = "phones", .type = dtype::i64, .shape = {}}};
  return [specs](element e) -> result<element> {
    if (e.size() != 1 || e[0].type() != dtype::string || e[0].num_elements() != 1)
      return invalid_argument("g2p_parse_entry: expects one serialized record");
    std::vector<tensor> parsed; // letters, S, phones, T
    RUNNEL_RETURN_IF_ERROR(
        parse_single_sequence_example(e[0].data<std::string>()[0], {}, specs, parsed, "entry"));
    const tensor& phones = parsed[2];
    int64_t n = phones.num_elements();
    tensor in(dtype::i64, shape{n + 1}), out(dtype::i64, shape{n + 1});
    in.data<int64_t>()[0] = g2p_go;
    for (int64_t i = 0; i < n; ++i) {
      in.data<int64_t>()[i + 1] = phones.data<int64_t>()[i];
      out.data<int64_t>()[i] = phones.data<int64_t>()[i];
    }
    out.data<int64_t>()[n] = g2p_eos;
    return element{tensor::scalar<int32_t>(int32_t(parsed[0].num_elements())), parsed[0],
                   tensor::scalar<int32_t>(int32_t(n + 1)), std::move(in), std::move(out)};
  };
}

} // namespace runnel::apps
