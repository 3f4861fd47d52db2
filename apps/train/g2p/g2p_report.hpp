#pragma once
// What the g2p app reports: error rates against the dictionary and attention maps as SVG.

#include <string>
#include <vector>

#include "runnel/ops/core/status.hpp"

namespace runnel::apps {

/// Levenshtein distance between two id sequences.
int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

/// Word error rate (a word is wrong unless every phone is right) and phone error rate (edit
/// distance over the reference phones), accumulated.
struct error_rates {
  int64_t words = 0, wrong_words = 0, phones = 0, phone_errors = 0;
  void add(const std::vector<int64_t>& predicted, const std::vector<int64_t>& reference);
  double wer() const { return words ? double(wrong_words) / double(words) : 0; }
  double per() const { return phones ? double(phone_errors) / double(phones) : 0; }
};

/// One word's attention: weights[i][j] is how much output phone i attended to letter j.
struct attention_map {
  std::string word;
  std::vector<std::string> phones;
  std::vector<std::vector<float>> weights;
};

/// The maps side by side as one SVG: letters across, phones down, darker = more attention.
status write_attention_svg(const std::string& path, const std::vector<attention_map>& maps);

} // namespace runnel::apps
