// lrt/model/variant_structure.hpp: a variant's structure as a runtime value (injection,
// projection, source layer): what a checkpoint records (lrt_config) and what the tools find a
// build by. The names of the library's named variants (baseline, lrt, lrt-release, residual, kv)
// live here once; any other structure is spelled injection/projection/source, e.g.
// "both/shared/block1". Structures compare normalised: a variant without KV injection has no
// projections (Shared), one without memory no source (final).
#pragma once

#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "config.hpp"
#include "variant.hpp"

namespace lrt {
inline namespace v0 {

struct VariantStructure {
  Injection injection = Injection::None;
  Projection projection = Projection::Shared;
  int source_layer = -1;  // -1: the final normed state

  /// The same structure with the fields that do not apply reset (see the header comment).
  constexpr VariantStructure normalised() const {
    VariantStructure s = *this;
    if (s.injection != Injection::KV && s.injection != Injection::Both) s.projection = Projection::Shared;
    if (s.injection == Injection::None) s.source_layer = -1;
    return s;
  }
  constexpr bool recurrent() const { return injection != Injection::None; }
  friend constexpr bool operator==(const VariantStructure& a, const VariantStructure& b) {
    const VariantStructure x = a.normalised(), y = b.normalised();
    return x.injection == y.injection && x.projection == y.projection && x.source_layer == y.source_layer;
  }
};

/// The structure of variant type V.
template <class V>
constexpr VariantStructure structure_of() {
  return VariantStructure{V::injection, V::projection, V::source_layer}.normalised();
}

/// The library's named variants (the tools' registry may add aliases of its own).
struct NamedVariant {
  std::string_view name;
  VariantStructure structure;
};
inline constexpr std::array<NamedVariant, 5> named_variants{{
    {"baseline", structure_of<variants::Baseline>()},
    {"lrt", structure_of<variants::Lrt>()},
    {"lrt-release", structure_of<variants::LrtRelease>()},
    {"residual", structure_of<variants::ResidualOnly>()},
    {"kv", structure_of<variants::KVOnly>()},
}};

/// "injection/projection/source": e.g. "both/shared/final", "both/shared/block1", "none/shared/final".
inline std::string spell(const VariantStructure& v) {
  const VariantStructure s = v.normalised();
  return std::string(to_string(s.injection)) + "/" + std::string(to_string(s.projection)) + "/" +
         (s.source_layer < 0 ? std::string("final") : "block" + std::to_string(s.source_layer));
}

/// The name of a structure: its named variant's, else its spelling.
inline std::string variant_name(const VariantStructure& s) {
  for (const NamedVariant& n : named_variants)
    if (n.structure == s) return std::string(n.name);
  return spell(s);
}

/// A structure for messages: "lrt (both/shared/final)", or the spelling alone where it is the
/// name ("both/shared/block1").
inline std::string variant_label(const VariantStructure& s) {
  const std::string name = variant_name(s), spelled = spell(s);
  return name == spelled ? name : name + " (" + spelled + ")";
}

/// The preset name of a variant (`baseline`, `lrt`, `lrt-release`, `residual`, `kv`), or its
/// spelling (e.g. "both/shared/block1") for other combinations.
template <class V>
std::string variant_name() {
  return variant_name(structure_of<V>());
}

inline std::optional<Injection> parse_injection(std::string_view s) {
  for (Injection i : {Injection::None, Injection::Residual, Injection::KV, Injection::Both})
    if (s == to_string(i)) return i;
  return std::nullopt;
}
inline std::optional<Projection> parse_projection(std::string_view s) {
  for (Projection p : {Projection::Shared, Projection::Layerwise})
    if (s == to_string(p)) return p;
  return std::nullopt;
}
/// "final" -> -1, "blockN" or "N" -> N (0 <= N < 2^20).
inline std::optional<int> parse_source_layer(std::string_view s) {
  if (s == "final") return -1;
  if (s.substr(0, 5) == "block") s.remove_prefix(5);
  int n = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || n < 0 || n >= (1 << 20)) return std::nullopt;
  return n;
}

/// A named variant ("lrt") or a spelling ("both/shared/block1"); nullopt for anything else.
inline std::optional<VariantStructure> parse_variant(std::string_view text) {
  for (const NamedVariant& n : named_variants)
    if (n.name == text) return n.structure;
  const std::size_t a = text.find('/'), b = a == std::string_view::npos ? a : text.find('/', a + 1);
  if (b == std::string_view::npos || text.find('/', b + 1) != std::string_view::npos) return std::nullopt;
  const auto i = parse_injection(text.substr(0, a));
  const auto p = parse_projection(text.substr(a + 1, b - a - 1));
  const auto s = parse_source_layer(text.substr(b + 1));
  if (!i || !p || !s) return std::nullopt;
  return VariantStructure{*i, *p, *s}.normalised();
}

}  // namespace v0
}  // namespace lrt
