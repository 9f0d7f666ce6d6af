// lrt/runtime/quantize.hpp: a checkpoint's matrices written as int8 or bf16 for decoding, from the
// runtime library (include/lrt/runtime/runtime.cpp) behind a
// light header (the standard library and lrt's config: no Eigen, fmt or model header).
//
//   const std::string in = lrt::runtime::checkpoint_model_file("runs/tiny");   // decoding.hpp
//   lrt::runtime::QuantizeSummary s = lrt::runtime::quantize_checkpoint_file(in, "tiny-int8.safetensors",
//                                                                            {.format = "int8", .group = 64});
//
// The work is lrt/io/quantize.hpp's quantize_checkpoint over the parameter table of the variant the
// file records (lrt::read_checkpoint's checks first: a damaged file is refused, not quantized).
// Errors are lrt::Error.
#pragma once

#include <cstdint>
#include <string>

#include "../core/config.hpp"

namespace lrt {
inline namespace v0 {
namespace runtime {

/// How quantize_checkpoint_file packs the matrices.
struct QuantizeOptions {
  std::string format = "int8";  ///< int8 (one float scale per `group` values of a row) or bf16
  std::int64_t group = 64;      ///< int8: values of a row per scale, >= 1
};

/// What quantize_checkpoint_file did.
struct QuantizeSummary {
  std::int64_t packed = 0, kept = 0;         ///< tensors packed, tensors written as they were
  std::int64_t bytes_in = 0, bytes_out = 0;  ///< bytes of tensor data read and written
  double max_abs_error = 0;                  ///< the largest change of a packed weight
};

/// Writes the checkpoint file `in` to `out` with its matrices (attention, MLP, memory projections,
/// lm_head) packed as options.format says; embedding tables, gates and scalars as they were.
/// Errors: lrt::Error (a bad format or group, a file that is not a valid f32 checkpoint, `out`
/// not writable).
LRT_API QuantizeSummary quantize_checkpoint_file(const std::string& in, const std::string& out,
                                                 const QuantizeOptions& options = {});

}  // namespace runtime
}  // namespace v0
}  // namespace lrt
