#pragma once
// The language model's data: the books split into chapters (every 10th chapter, from the 9th,
// validation; from the 10th, test; the rest training), chapters into sentences, sentences into
// token ids of a vocabulary of the most frequent training words, written once as
// SequenceExample record files and as plain id lines (for the PyTorch peer).
//
// Ids: 0 is <eos> (it also starts each input, and pads batches: padding is masked), 1 is <unk>,
// then the words by falling training count, so that a log-uniform sampler suits them.

#include <cstdint>
#include <string>
#include <vector>

#include "runnel/actors/data/dataset.hpp"
#include "runnel/apps/train/text/corpus.hpp"

namespace runnel::apps {

inline constexpr int64_t lm_eos = 0, lm_unk = 1;

struct lm_split {
  std::vector<std::vector<std::string>> sentences; ///< words of each sentence, in book order
  int64_t chapters = 0;
};

struct lm_corpus {
  lm_split train, valid, test;
};

/// Reads the books (Project Gutenberg texts: the licence around the "*** START"/"*** END" marks
/// is dropped, and front matter before the first chapter heading), finds chapter headings
/// ("CHAPTER ...", "ADVENTURE ...", or a roman numeral with an upper-case title) and sentences
/// (ended by '.', '!' or '?', not after Mr/Mrs/Dr/St or an initial). Sentences longer than
/// `max_words` are cut into pieces of at most that many words.
result<lm_corpus> read_lm_corpus(const std::vector<std::string>& books, int64_t max_words);

/// <eos>, <unk>, then the `size` - 2 most frequent training words.
std::vector<std::string> lm_vocabulary(const lm_split& train, int64_t size);

/// Each sentence as ids (unknown words as <unk>).
std::vector<std::vector<int64_t>> lm_encode(const std::vector<std::string>& vocab,
                                            const lm_split& split);

/// Writes SequenceExamples (context "length": the word count; feature list "tokens": one int64
/// per word) to `path`, and the same sentences as lines of ids to `ids_path`.
status write_lm_split(const std::string& path, const std::string& ids_path,
                      const std::vector<std::vector<int64_t>>& sentences);
/// Reads a vocabulary file (a word per line) or writes one.
result<std::vector<std::string>> read_vocabulary_file(const std::string& path);
status write_vocabulary_file(const std::string& path, const std::vector<std::string>& vocab);

/// A map function from a serialized SequenceExample to {length (int32 scalar, words + 1),
/// inputs ([length] int64: <eos> then the words), targets ([length] int64: the words then
/// <eos>)}.
map_fn lm_parse_sentence();

/// The records' feature specs for ParseSingleSequenceExample: no context, "tokens" per step.
std::vector<feature_spec> lm_sequence_specs();

} // namespace runnel::apps
