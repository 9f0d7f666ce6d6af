// lrt/decode/lean_variants.hpp: the one table from a checkpoint's structure to the lean decoder
// code compiled for it, for the programs that decode without the model (the C API and
// lrt-embedded-generate): LeanVariants lists the variant types they compile; with_variant calls a
// generic function with the one whose structure a checkpoint records (read_checkpoint's
// CheckpointInfo::run.structure). The tools (lrt-train, lrt-eval, lrt-generate) find theirs in
// their registry of (variant, schedule) pairs, examples/tools/registry/.
//
//   lrt::CheckpointInfo info;  // from lrt::read_checkpoint
//   const bool known = lrt::with_variant(lrt::LeanVariants{}, info.run.structure, [&](auto v) {
//     lrt::LeanDecoder<decltype(v), float> dec(...);
//   });
#pragma once

#include <string>

#include "../model/variant.hpp"
#include "../model/variant_structure.hpp"

namespace lrt {
inline namespace v0 {

/// A list of variant types.
template <class... V>
struct VariantList {};

/// The variants the lean programs compile: baseline, lrt and lrt-release.
using LeanVariants = VariantList<variants::Baseline, variants::Lrt, variants::LrtRelease>;

/// Calls f(V{}) for the variant V of the list whose structure is s; returns whether one was.
template <class... V, class F>
bool with_variant(VariantList<V...>, const VariantStructure& s, F&& f) {
  return ((structure_of<V>() == s ? (f(V{}), true) : false) || ...);
}

/// The list's names for messages: "baseline, lrt and lrt-release".
template <class... V>
std::string variant_names(VariantList<V...>) {
  const std::string names[] = {variant_name(structure_of<V>())...};
  std::string out;
  for (std::size_t i = 0; i < sizeof...(V); ++i)
    out += (i == 0 ? "" : i + 1 == sizeof...(V) ? " and " : ", ") + names[i];
  return out;
}

}  // namespace v0
}  // namespace lrt
