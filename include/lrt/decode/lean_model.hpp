// lrt/decode/lean_model.hpp: the lean decoder (decode/lean.hpp) over a Model's parameters:
// lean_weights(model) views every parameter in place (nothing copied; the model must outlive the
// decoder and its parameters must not be reallocated), or the packed int8/bf16 matrices of
// pack_weights / PackedWeights::read in their place, and LeanDecoder's deduction from a model.
// Kept apart from lean.hpp so that the lean decoder itself needs no autodiff layer.
#pragma once

#include "../model/gpt.hpp"
#include "lean.hpp"

namespace lrt {
inline namespace v0 {

/// Views of a CPU model's parameters for LeanDecoder (empty views where the variant has none).
/// With `packed` (io/quantize.hpp: read from an int8 or bf16 file, or packed from the model), a
/// matrix it holds under the parameter's name is viewed packed instead (it must outlive the
/// decoder too, and match the parameter's shape).
template <class V, class T>
LeanWeights<T> lean_weights(const Model<V, T, cpu::Device>& m, const PackedWeights* packed = nullptr) {
  const auto view = [packed](const ad::Param<T, 2, cpu::Device>* p) {
    if (!p) return LeanMatrix<T>{};
    LeanMatrix<T> v{p->value().data(), p->shape()[0], p->shape()[1]};
    if (const auto* pm = packed ? packed->find(p->name()) : nullptr) {
      check(pm->rows == v.rows && pm->cols == v.cols, "lean_weights", "packed matrix '", p->name(), "' is (", pm->rows,
            ", ", pm->cols, "), the model's ", Shape<2>{v.rows, v.cols});
      v.data = nullptr;
      if (!pm->q.empty())
        v.q = pm->q.data(), v.scales = pm->scales.data(), v.group = packed->group;
      else
        v.bf16 = pm->bf16.data();
    }
    return v;
  };
  LeanWeights<T> w;
  w.config = m.config();
  w.layers.resize(m.blocks().size());
  m.for_each_param_spec([&](auto& p, const WeightSpec& s) {
    if constexpr (std::remove_cvref_t<decltype(p.shape())>::rank == 2) {
      if (!visit_field(
              w, s, [&](LeanMatrix<T>& f) { f = view(&p); }, [](const T*&) {}))
        w.other.push_back({s.name, view(&p)});
    } else if (!visit_field(
                   w, s, [](LeanMatrix<T>&) {}, [&](const T*& f) { f = p.value().data(); })) {
      w.other.push_back({s.name, LeanMatrix<T>{p.value().data(), s.rows, 1}});
    }
  });
  return w;
}

/// The model's packable matrices (its parameter table's) packed in memory (what lrt-quantize would
/// write for it, io/quantize.hpp).
template <class V>
PackedWeights pack_weights(const Model<V, float, cpu::Device>& m, WeightFormat format, std::int64_t group = 64) {
  return PackedWeights::pack(format, group, [&](auto&& add) {
    m.for_each_param_spec([&](auto& p, const WeightSpec& s) {
      const auto& v = p.value();
      if constexpr (std::remove_cvref_t<decltype(v.shape())>::rank == 2)
        if (s.packable)
          add(p.name(), std::span<const float>(v.data(), static_cast<std::size_t>(v.numel())), v.shape()[0],
              v.shape()[1]);
    });
  });
}

/// A lean decoder of a CPU model (its parameters viewed in place, see lean_weights).
template <class V, class T>
LeanDecoder<V, T> make_lean_decoder(const Model<V, T, cpu::Device>& m,
                                    typename LeanDecoder<V, T>::Options o = typename LeanDecoder<V, T>::Options{}) {
  return LeanDecoder<V, T>(lean_weights(m), o);
}

}  // namespace v0
}  // namespace lrt
