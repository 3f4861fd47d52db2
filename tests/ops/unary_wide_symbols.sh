#!/usr/bin/env bash
# The ISA variants of the unary rows (ops/cpu/unary_avx512.cpp, unary_avx2.cpp) must define no
# symbol the rest of the program could share: an inline function compiled there for AVX-512 and
# chosen by the linker over the baseline's copy would crash AVX2-only machines. Every global or
# weak function they define must be in their renamed Eigen (Eigen_avx512, Eigen_avx2) or their
# own namespace (runnel::avx512, runnel::avx2). Data is the same bytes whatever the ISA (UBSan's
# typeinfo of function types, say) and may be shared.
#   unary_wide_symbols.sh OBJECT...   (the objects of runnel_ops; others are skipped)
set -uo pipefail
checked=0
failures=0
for object in "$@"; do
  case "$object" in
  *unary_avx512.cpp.o) isa=avx512 ;;
  *unary_avx2.cpp.o) isa=avx2 ;;
  *) continue ;;
  esac
  checked=$((checked + 1))
  # Global (T), weak (W) and indirect (i) functions, demangled; weak objects are V.
  shared=$(nm -C --defined-only "$object" | awk '$2 ~ /^[TWi]$/' | cut -d' ' -f3-)
  if [[ -z "$shared" ]]; then
    echo "FAIL $object: defines no global symbol (is runnel::$isa::unary_f32 there?)"
    failures=$((failures + 1))
    continue
  fi
  # A name that mentions either namespace (as itself or a template argument) is theirs alone.
  stray=$(grep -vE "(^|[^A-Za-z_])(Eigen_$isa::|runnel::$isa::)" <<<"$shared")
  if [[ -n "$stray" ]]; then
    echo "FAIL $object: symbols outside Eigen_$isa and runnel::$isa:"
    echo "$stray" | head -20
    failures=$((failures + 1))
  fi
done
if [[ $checked -ne 2 ]]; then
  echo "FAIL: found $checked of the 2 ISA objects among the arguments"
  exit 1
fi
[[ $failures -eq 0 ]] && echo "unary_wide_symbols: both ISA objects keep to their namespaces"
exit $((failures > 0))
