#!/usr/bin/env bash
# Every installed public header compiles on its own, and all of them in two orders (the list's
# and reversed), against an installed tree: CI runs it on `cmake --install`'s output.
#   check_headers.sh PREFIX
# PREFIX/share/runnel/public_headers.txt lists the headers (relative to include/runnel/).
set -euo pipefail
prefix=$1
list=$prefix/share/runnel/public_headers.txt
[[ -f $list ]] || { echo "check_headers: $list is missing (install first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cxx=${CXX:-c++}
flags=(-std=c++20 -fsyntax-only -I"$prefix/include" -isystem /usr/include/eigen3)
mapfile -t headers <"$list"
# One translation unit per header, two compilers at a time.
for h in "${headers[@]}"; do
  printf '#include <runnel/%s>\n' "$h" >"$work/$(echo "$h" | tr / _).cpp"
done
if ! ls "$work"/*.cpp | xargs -P "$(nproc)" -n 1 "$cxx" "${flags[@]}" 2>"$work/errors"; then
  echo "check_headers: some headers do not compile on their own:" >&2
  grep -E "error|^In file included" "$work/errors" | head -40 >&2
  exit 1
fi
# All together, in the list's order and in reverse (a name one header declares must not break
# another: e.g. the builder function `variable` and the class `variable`).
{ for h in "${headers[@]}"; do printf '#include <runnel/%s>\n' "$h"; done; } >"$work/all.cpp"
{ for ((i = ${#headers[@]} - 1; i >= 0; i--)); do printf '#include <runnel/%s>\n' "${headers[$i]}"; done; } >"$work/all_reversed.cpp"
for tu in all all_reversed; do
  if ! "$cxx" "${flags[@]}" "$work/$tu.cpp" 2>"$work/errors"; then
    echo "check_headers: the headers together ($tu.cpp) do not compile:" >&2
    grep -E "error" "$work/errors" | head -20 >&2
    exit 1
  fi
done
echo "check_headers: ${#headers[@]} public headers compile alone and together in both orders"
