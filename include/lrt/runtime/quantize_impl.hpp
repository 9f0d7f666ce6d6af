// lrt/runtime/quantize_impl.hpp: the definitions of lrt/runtime/quantize.hpp, compiled once in the
// runtime library's unit (include/lrt/runtime/runtime.cpp, LRT_RUNTIME_IMPLEMENTATION).
#pragma once

#include <string>

#include "../io/quantize.hpp"
#include "../io/safetensors.hpp"
#include "../model/checkpoint_file.hpp"
#include "quantize.hpp"

#if defined(LRT_RUNTIME_IMPLEMENTATION)

namespace lrt {
inline namespace v0 {
namespace runtime {

QuantizeSummary quantize_checkpoint_file(const std::string& in, const std::string& out,
                                         const QuantizeOptions& options) {
  constexpr const char* op = "quantize";
  check(options.format == "int8" || options.format == "bf16", op, "format must be int8 or bf16, got '", options.format,
        "'");
  check(options.group >= 1, op, "group must be >= 1, got ", options.group);
  const auto r = st::Reader::open(in);
  const CheckpointInfo info = read_checkpoint(r);  // the one loader's checks; its table says what is packed
  QuantizeReport rep;
  const st::Writer w = quantize_checkpoint(r, weight_format_from_string(options.format), options.group,
                                           packable_names(weight_table(info)), &rep);
  w.write(out);
  QuantizeSummary s;
  s.packed = rep.packed, s.kept = rep.kept, s.max_abs_error = rep.max_abs_error;
  s.bytes_in = static_cast<std::int64_t>(rep.bytes_in), s.bytes_out = static_cast<std::int64_t>(rep.bytes_out);
  return s;
}

}  // namespace runtime
}  // namespace v0
}  // namespace lrt

#endif  // LRT_RUNTIME_IMPLEMENTATION
