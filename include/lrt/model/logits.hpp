// lrt/model/logits.hpp: the logits the model hands out (spec §2.4), the one formula every path
// shares: the decoders' returned logits and the schedules' kept logits.
#pragma once

#include "../tensor/expr.hpp"
#include "config.hpp"

namespace lrt {
inline namespace v0 {

/// The logits the model hands out for head outputs z (rows, V): tanh(z / softcap) softcap with the
/// config's logit_softcap (spec §2.4), as the loss sees them. An expression (z is held by value);
/// the decoder and the schedules' kept logits both use it.
template <class T, class Z>
auto capped_logits(const Z& z, const ModelConfig& c) {
  const T cap = static_cast<T>(c.logit_softcap);
  return lrt::tanh(z / cap) * cap;
}

}  // namespace v0
}  // namespace lrt
