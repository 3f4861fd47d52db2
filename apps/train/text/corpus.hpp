#pragma once
// Text corpora for the text-model apps: tokenizing plain-text books, a vocabulary sorted by
// falling frequency (so that id order suits a log-uniform sampler), and the corpus as token-id
// record files (tf.train.Example records with an int64 list "ids" per chunk), read back through
// a dataset.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runnel/ops/core/status.hpp"

namespace runnel::apps {

/// The Debian-packaged public-domain books the apps default to (Moby Dick from
/// golang-github-colinmarc-hdfs-dev, Sherlock Holmes from golang-github-jdkato-prose-dev).
std::vector<std::string> default_books();

/// Lower-cased words: runs of ASCII letters, with apostrophes inside a word kept ("don't").
std::vector<std::string> tokenize(const std::string& text);
/// The words of each file in order; an error names a missing or unreadable file.
result<std::vector<std::string>> read_words(const std::vector<std::string>& files);

struct vocabulary {
  std::vector<std::string> words;  ///< by falling count (ties: alphabetical)
  std::vector<int64_t> counts;     ///< aligned with words
  std::unordered_map<std::string, int64_t> ids;
  int64_t size() const { return int64_t(words.size()); }
  /// The id of `w`, or -1.
  int64_t find(const std::string& w) const;
};
/// Words seen at least `min_count` times.
vocabulary build_vocabulary(const std::vector<std::string>& words, int64_t min_count);
/// The ids of the words the vocabulary holds (the rest are dropped, as word2vec does).
std::vector<int64_t> to_ids(const vocabulary& v, const std::vector<std::string>& words);

/// Writes `ids` as records of `chunk` ids each (the last may be shorter) to `path`.
status write_id_records(const std::string& path, const std::vector<int64_t>& ids, int64_t chunk);

/// A short hash of strings (for naming derived files after what they were derived from).
std::string fingerprint(const std::vector<std::string>& parts);

} // namespace runnel::apps
