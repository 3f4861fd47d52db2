#include "runnel/apps/train/lm/lm_data.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "runnel/storage/example.hpp"
#include "runnel/storage/example_parse.hpp"
#include "runnel/storage/record_file.hpp"

namespace runnel::apps {
namespace {

bool starts_with(const std::string& s, std::string_view p) {
  return s.rfind(p, 0) == 0;
}

/// "CHAPTER 1. Loomings.", "ADVENTURE I. A SCANDAL IN BOHEMIA", "VII. THE ADVENTURE OF ...".
bool is_heading(const std::string& line) {
  if (starts_with(line, "CHAPTER ") || starts_with(line, "ADVENTURE "))
    return true;
  size_t i = 0;
  while (i < line.size() && std::string_view("IVXLC").find(line[i]) != std::string_view::npos)
    ++i;
  if (i == 0 || i >= line.size() || line[i] != '.')
    return false;
  for (size_t k = i + 1; k < line.size(); ++k) {
    unsigned char c = static_cast<unsigned char>(line[k]);
    if (std::islower(c))
      return false;
  }
  return true;
}

/// Whether the '.' at `end` closes an abbreviation (Mr., Mrs., Dr., St.) or an initial ("J.").
bool is_abbreviation(const std::string& text, size_t end) {
  size_t b = end;
  while (b > 0 && std::isalpha(static_cast<unsigned char>(text[b - 1])))
    --b;
  std::string w = text.substr(b, end - b);
  for (auto& c : w)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return w.size() == 1 || w == "mr" || w == "mrs" || w == "dr" || w == "st";
}

void add_sentences(const std::string& text, int64_t max_words,
                   std::vector<std::vector<std::string>>& out) {
  size_t begin = 0;
  auto flush = [&](size_t end) {
    auto words = tokenize(text.substr(begin, end - begin));
    for (size_t i = 0; i < words.size(); i += size_t(max_words))
      out.emplace_back(words.begin() + long(i),
                       words.begin() + long(std::min(words.size(), i + size_t(max_words))));
    begin = end;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if ((c == '!' || c == '?' || (c == '.' && !is_abbreviation(text, i))) &&
        (i + 1 == text.size() || std::isspace(static_cast<unsigned char>(text[i + 1])) ||
         text[i + 1] == '"' || text[i + 1] == '\''))
      flush(i + 1);
  }
  flush(text.size());
}

} // namespace

result<lm_corpus> read_lm_corpus(const std::vector<std::string>& books, int64_t max_words) {
  if (max_words < 1)
    return invalid_argument("sentences of at most " + std::to_string(max_words) +
                            " words: must be positive");
  lm_corpus c;
  int64_t chapter = -1; // across the books
  for (auto& path : books) {
    std::ifstream in(path);
    if (!in)
      return not_found("cannot read book " + path +
                       " (Debian's golang-github-colinmarc-hdfs-dev and "
                       "golang-github-jdkato-prose-dev; scripts/setup installs them)");
    std::string line, text;
    bool in_body = false, in_chapter = false, marked = false;
    std::vector<std::string> lines;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      lines.push_back(line);
      marked = marked || starts_with(line, "*** START OF");
    }
    int64_t found = 0;
    auto end_chapter = [&] {
      if (!in_chapter)
        return;
      std::vector<std::vector<std::string>> s;
      add_sentences(text, max_words, s);
      text.clear();
      if (s.empty())
        return;
      ++chapter;
      ++found;
      lm_split& to = chapter % 10 == 8 ? c.valid : chapter % 10 == 9 ? c.test : c.train;
      ++to.chapters;
      for (auto& x : s)
        to.sentences.push_back(std::move(x));
    };
    in_body = !marked;
    for (auto& l : lines) {
      if (starts_with(l, "*** START OF")) {
        in_body = true;
        continue;
      }
      if (starts_with(l, "*** END OF") || starts_with(l, "End of the Project Gutenberg") ||
          starts_with(l, "End of Project Gutenberg"))
        break;
      if (!in_body)
        continue;
      if (is_heading(l)) {
        end_chapter();
        in_chapter = true;
        continue;
      }
      if (in_chapter) {
        text += l;
        text += '\n';
      }
    }
    end_chapter();
    if (found == 0)
      return invalid_argument("book " + path +
                              " has no chapter headings (CHAPTER ..., "
                              "ADVENTURE ..., or a roman numeral and an upper-case title)");
  }
  if (c.valid.sentences.empty() || c.test.sentences.empty())
    return invalid_argument("the books have " + std::to_string(chapter + 1) +
                            " chapters: at least 10 are needed for a validation and a test split");
  return c;
}

std::vector<std::string> lm_vocabulary(const lm_split& train, int64_t size) {
  std::unordered_map<std::string, int64_t> counts;
  for (auto& s : train.sentences)
    for (auto& w : s)
      ++counts[w];
  std::vector<std::pair<std::string, int64_t>> by_count(counts.begin(), counts.end());
  std::sort(by_count.begin(), by_count.end(), [](auto& a, auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::string> v{"<eos>", "<unk>"};
  for (auto& [w, n] : by_count) {
    if (int64_t(v.size()) >= size)
      break;
    v.push_back(w);
  }
  return v;
}

std::vector<std::vector<int64_t>> lm_encode(const std::vector<std::string>& vocab,
                                            const lm_split& split) {
  std::unordered_map<std::string, int64_t> ids;
  for (size_t i = 2; i < vocab.size(); ++i)
    ids.emplace(vocab[i], int64_t(i));
  std::vector<std::vector<int64_t>> out;
  out.reserve(split.sentences.size());
  for (auto& s : split.sentences) {
    std::vector<int64_t> x;
    x.reserve(s.size());
    for (auto& w : s) {
      auto it = ids.find(w);
      x.push_back(it == ids.end() ? lm_unk : it->second);
    }
    out.push_back(std::move(x));
  }
  return out;
}

status write_lm_split(const std::string& path, const std::string& ids_path,
                      const std::vector<std::vector<int64_t>>& sentences) {
  auto tmp = path + ".tmp", ids_tmp = ids_path + ".tmp";
  RUNNEL_ASSIGN_OR_RETURN(auto w, record_writer::open(tmp));
  std::ofstream ids(ids_tmp);
  for (auto& s : sentences) {
    sequence_example e;
    feature len;
    len.kind = feature_kind::int64s;
    len.int64s = {int64_t(s.size())};
    e.context["length"] = len;
    auto& steps = e.feature_lists["tokens"];
    for (size_t i = 0; i < s.size(); ++i) {
      feature f;
      f.kind = feature_kind::int64s;
      f.int64s = {s[i]};
      steps.push_back(std::move(f));
      ids << (i ? " " : "") << s[i];
    }
    ids << '\n';
    RUNNEL_RETURN_IF_ERROR(w.write(encode_sequence_example(e)));
  }
  RUNNEL_RETURN_IF_ERROR(w.close());
  ids.close();
  if (!ids)
    return data_loss("cannot write " + ids_tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0 ||
      std::rename(ids_tmp.c_str(), ids_path.c_str()) != 0)
    return data_loss("cannot rename " + tmp + " to " + path);
  return {};
}

result<std::vector<std::string>> read_vocabulary_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return not_found("cannot read vocabulary " + path);
  std::vector<std::string> v;
  std::string line;
  while (std::getline(in, line))
    v.push_back(line);
  if (v.size() < 2 || v[0] != "<eos>" || v[1] != "<unk>")
    return invalid_argument("vocabulary " + path + " must start with <eos> and <unk> lines");
  return v;
}

status write_vocabulary_file(const std::string& path, const std::vector<std::string>& vocab) {
  auto tmp = path + ".tmp";
  std::ofstream out(tmp);
  for (auto& w : vocab)
    out << w << '\n';
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0)
    return data_loss("cannot write vocabulary " + path);
  return {};
}

std::vector<feature_spec> lm_sequence_specs() {
  return {{.key = "tokens", .type = dtype::i64, .shape = {}}};
}

map_fn lm_parse_sentence() {
  return [specs = lm_sequence_specs()](element e) -> result<element> {
    if (e.size() != 1 || e[0].type() != dtype::string || e[0].num_elements() != 1)
      return invalid_argument("lm_parse_sentence: expects one serialized record");
    std::vector<tensor> parsed;
    RUNNEL_RETURN_IF_ERROR(
        parse_single_sequence_example(e[0].data<std::string>()[0], {}, specs, parsed, "sentence"));
    const tensor& tokens = parsed[0];
    int64_t n = tokens.num_elements();
    tensor inputs(dtype::i64, shape{n + 1}), targets(dtype::i64, shape{n + 1});
    auto* in = inputs.data<int64_t>();
    auto* out = targets.data<int64_t>();
    const auto* t = tokens.data<int64_t>();
    in[0] = lm_eos;
    for (int64_t i = 0; i < n; ++i) {
      in[i + 1] = t[i];
      out[i] = t[i];
    }
    out[n] = lm_eos;
    return element{tensor::scalar<int32_t>(int32_t(n + 1)), std::move(inputs), std::move(targets)};
  };
}

} // namespace runnel::apps
