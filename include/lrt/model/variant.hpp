// lrt/model/variant.hpp: the structural choices of a model (spec §1, §3), compile-time types with
// no code behind them: Injection, Projection, the memory source (FinalSource, BlockSource<L>),
// Variant<I, P, Source> and the named variants::*. Used by the model (model/gpt.hpp) and by the lean
// decoder (decode/lean.hpp), which must not pull in the autodiff layer.
#pragma once

#include <string_view>

namespace lrt {
inline namespace v0 {

/// Where the recurrent memory enters each layer.
enum class Injection { None, Residual, KV, Both };
/// One (P_k, P_v) pair for all layers, or one per layer (the release).
enum class Projection { Shared, Layerwise };

/// Source of the memory: the final normed state h_t (the release).
struct FinalSource {
  static constexpr int index = -1;
};
/// Source of the memory: N(x after block L) [P]. Checked against the layer count at construction.
template <int L>
struct BlockSource {
  static_assert(L >= 0,
                "BlockSource<L>: the source layer is a block index and must be >= 0 (FinalSource is the final "
                "normed state)");
  static constexpr int index = L;
};

/// The structural choices of a model (compile time); sizes and the rest are runtime (ModelConfig).
template <Injection I, Projection P = Projection::Shared, class Source = FinalSource>
struct Variant {
  static constexpr Injection injection = I;
  static constexpr Projection projection = P;
  static constexpr int source_layer = Source::index;  // -1: final
  static constexpr bool residual = I == Injection::Residual || I == Injection::Both;
  static constexpr bool kv = I == Injection::KV || I == Injection::Both;
  static constexpr bool recurrent = I != Injection::None;
};

namespace variants {
using Baseline = Variant<Injection::None>;                           // `baseline`
using Lrt = Variant<Injection::Both, Projection::Shared>;            // `lrt`: the paper's default
using LrtRelease = Variant<Injection::Both, Projection::Layerwise>;  // `lrt-release`
using ResidualOnly = Variant<Injection::Residual>;                   // `residual`
using KVOnly = Variant<Injection::KV, Projection::Shared>;           // `kv`
}  // namespace variants

/// The variants whose Model<V>, Trainer<V> (the natural schedule) and Decoder<V>, float on the CPU,
/// the runtime library compiles (include/lrt/runtime/compiled_pairs.cpp): a program that links
/// lrt::runtime gets LRT_COMPILED_PAIRS defined, and the headers then declare these instantiations
/// extern (gpt.hpp, trainer.hpp, decoder.hpp), so that it compiles none of their code itself.
/// X(V) for each.
#define LRT_COMPILED_VARIANTS(X) X(::lrt::variants::Baseline) X(::lrt::variants::Lrt)

inline std::string_view to_string(Injection i) {
  switch (i) {
    case Injection::None:
      return "none";
    case Injection::Residual:
      return "residual";
    case Injection::KV:
      return "kv";
    case Injection::Both:
      return "both";
  }
  return "?";
}
inline std::string_view to_string(Projection p) { return p == Projection::Shared ? "shared" : "layerwise"; }

}  // namespace v0
}  // namespace lrt
