#pragma once
// Denormal floats are flushed to zero where kernels run, as TensorFlow's executor does around
// every op. Arithmetic on a denormal (a float32 under 1.2e-38 in magnitude) takes a microcode
// assist on x86 that costs several times a normal operation: Adam's moments decay into that
// range as a model converges, and a ps applying Adam more than doubled its CPU per step after
// ~620 steps (docs/performance.md, "Denormals").
//
//   { scoped_flush_denormals flush; kernel.compute(ctx); }   // the executor, per kernel
//   flush_denormals_on_this_thread();                          // a thread the runtime owns
//
// RUNNEL_DENORMALS=keep in the environment keeps them (IEEE gradual underflow, slowly).

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define RUNNEL_HAS_MXCSR 1
#endif

namespace runnel {

/// MXCSR's flush-to-zero (results) and denormals-are-zero (inputs) bits.
constexpr unsigned denormal_bits = 0x8040;

/// False when RUNNEL_DENORMALS=keep (read once).
inline bool flush_denormals_wanted() noexcept {
  static const bool wanted = [] {
    const char* v = std::getenv("RUNNEL_DENORMALS");
    return !(v && std::strcmp(v, "keep") == 0);
  }();
  return wanted;
}

/// Set on threads the runtime owns once flush_denormals_on_this_thread ran there: their kernels
/// then skip reading and writing MXCSR (stmxcsr, and ldmxcsr twice, were 5% of a loop's firings).
inline thread_local bool denormals_flushed_for_good = false;

/// While it lives, this thread flushes denormal results to zero and reads denormal inputs as
/// zero; then it restores what it found (a kernel may run on a caller's thread).
class scoped_flush_denormals {
public:
  scoped_flush_denormals() noexcept {
#ifdef RUNNEL_HAS_MXCSR
    if (denormals_flushed_for_good || !flush_denormals_wanted())
      return;
    saved_ = _mm_getcsr();
    if ((saved_ & denormal_bits) != denormal_bits)
      _mm_setcsr(saved_ | denormal_bits);
#endif
  }
  ~scoped_flush_denormals() {
#ifdef RUNNEL_HAS_MXCSR
    if ((saved_ & denormal_bits) != denormal_bits)
      _mm_setcsr(saved_);
#endif
  }
  scoped_flush_denormals(const scoped_flush_denormals&) = delete;
  scoped_flush_denormals& operator=(const scoped_flush_denormals&) = delete;

private:
  unsigned saved_ = denormal_bits;
};

/// Flushes denormals on this thread from now on (threads the runtime starts and owns, whose
/// code leaves MXCSR as it found it).
inline void flush_denormals_on_this_thread() noexcept {
#ifdef RUNNEL_HAS_MXCSR
  if (flush_denormals_wanted()) {
    _mm_setcsr(_mm_getcsr() | denormal_bits);
    denormals_flushed_for_good = true;
  }
#endif
}

/// Whether this thread flushes denormals now.
inline bool flushing_denormals() noexcept {
#ifdef RUNNEL_HAS_MXCSR
  return (_mm_getcsr() & denormal_bits) == denormal_bits;
#else
  return false;
#endif
}

} // namespace runnel
