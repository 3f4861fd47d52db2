#pragma once
// The grapheme-to-phoneme data: the CMU pronouncing dictionary as Debian's festlex-cmu ships it
// (/usr/share/festival/dicts/cmu/cmudict-0.4.out, Festival's phone set), each word's first
// pronunciation with the stress marks dropped. Every 20th word (in the dictionary's order) is
// held out for testing (5%), the rest train. Written once as SequenceExample records (feature
// lists "letters" and "phones").
//
// Letter ids: 0 pads, then the letters seen. Phone ids: 0 is <eos> (and pads), 1 is <go> (starts
// the decoder's input), then the phones in alphabetical order.

#include <string>
#include <vector>

#include "runnel/actors/data/dataset.hpp"

namespace runnel::apps {

inline constexpr int64_t g2p_eos = 0, g2p_go = 1;

struct g2p_entry {
  std::string word;
  std::vector<std::string> phones;
};

struct g2p_corpus {
  std::vector<g2p_entry> train, test;
  std::vector<std::string> letters; ///< id i+1 is letters[i] (one byte each)
  std::vector<std::string> phones;  ///< id i is phones[i]: "<eos>", "<go>", then the phones
};

/// Reads the dictionary; words longer than `max_letters` are left out. Errors name the file and
/// line.
result<g2p_corpus> read_g2p_corpus(const std::string& path, int64_t max_letters);

std::vector<int64_t> g2p_letter_ids(const g2p_corpus& c, const std::string& word);
std::vector<int64_t> g2p_phone_ids(const g2p_corpus& c, const std::vector<std::string>& phones);

/// Writes the entries as SequenceExamples.
status write_g2p_split(const std::string& path, const g2p_corpus& c,
                       const std::vector<g2p_entry>& entries);

/// A map function from a serialized record to {letter count (int32), letters [S] int64, decoder
/// length (int32, phones + 1), decoder input [T] (<go>, phones), decoder target [T] (phones,
/// <eos>)}.
map_fn g2p_parse_entry();

} // namespace runnel::apps
