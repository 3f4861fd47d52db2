#pragma once
// Copies that stream past the caches, for bytes the writing core will not read again soon: a
// record waiting in a shuffle window until it is parsed, a tensor written into a ring that
// another process reads. An ordinary copy first brings each destination line into the cache
// (reading memory it is about to overwrite) and evicts what the core was using; non-temporal
// stores do neither.
//
//   copy_streaming(slot, record.data(), record.size());
//   ...                              // more copies
//   streaming_fence();               // before another thread may read what was copied
//
// On CPUs other than x86-64 both are an ordinary memcpy and nothing.
#include <cstddef>

namespace runnel {

/// Copies `n` bytes from `from` to `to` with non-temporal stores where it can.
void copy_streaming(void* to, const void* from, size_t n);
/// Orders the stores of earlier copy_streaming calls before any later store (such as the one
/// that hands the bytes to another thread): they are weakly ordered until then.
void streaming_fence();

} // namespace runnel
