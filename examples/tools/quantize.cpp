// lrt-quantize: writes a checkpoint's matrices as int8 (one scale per group of values of a row) or
// bf16, for decoding (io/quantize.hpp, through the runtime library: lrt/runtime/quantize.hpp).
// lrt-generate, lrt-eval and the C API read the result like any checkpoint; on the CPU the lean
// decoder multiplies by the packed matrices directly.
//   lrt-quantize --checkpoint runs/small --out small-int8.safetensors
//   lrt-quantize --checkpoint runs/small/model.safetensors --out small-bf16.safetensors --format bf16
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include <fmt/format.h>
#include <lrt/runtime/decoding.hpp>
#include <lrt/runtime/quantize.hpp>

#include "cli/args.hpp"

int main(int argc, char** argv) {
  tool::Args a("lrt-quantize",
               "Writes a checkpoint's matrices (attention, MLP, memory projections, lm_head) as int8 with per-group "
               "scales, or as bf16; embedding tables, gates and scalars stay as they are.");
  a.option("checkpoint", "FILE", "model.safetensors written by lrt-train (f32), or its --out directory", "", true)
      .option("out", "FILE", "the file to write (not the checkpoint itself)", "", true)
      .option("format", "F", "int8 (one float scale per group of a row) or bf16", "int8")
      .option("group", "N", "int8: values of a row per scale", "64");
  a.alias("-m", "checkpoint").alias("-o", "out");
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    lrt::runtime::QuantizeOptions o;
    o.format = a.str("format");
    if (o.format != "int8" && o.format != "bf16")
      throw tool::UsageError(fmt::format("--format must be int8 or bf16, got '{}'", o.format));
    o.group = a.integer("group", 1, 1 << 20);
    tool::require_path(a.str("checkpoint"), "--checkpoint");
    std::string note;
    const std::string in = lrt::runtime::checkpoint_model_file(a.str("checkpoint"), &note), out = a.str("out");
    if (!note.empty()) std::fprintf(stderr, "warning: %s\n", note.c_str());
    std::error_code ec;
    if (std::filesystem::equivalent(in, out, ec))
      throw tool::UsageError(
          fmt::format("--out '{}' is the checkpoint itself: write the quantized copy elsewhere", out));
    const lrt::runtime::QuantizeSummary rep = lrt::runtime::quantize_checkpoint_file(in, out, o);
    const std::string how = o.format == "int8" ? fmt::format("int8 in groups of {}", o.group) : "bf16";
    fmt::print("read {}: {} tensors, {} bytes of data\n", in, rep.packed + rep.kept, rep.bytes_in);
    fmt::print("wrote {}: {} matrices as {}, {} tensors as they were; {} bytes of data ({:.2f}x smaller)\n", out,
               rep.packed, how, rep.kept, rep.bytes_out,
               rep.bytes_out > 0 ? static_cast<double>(rep.bytes_in) / static_cast<double>(rep.bytes_out) : 0.0);
    fmt::print("largest change of a weight: {:.3g}\n", rep.max_abs_error);
    if (rep.packed == 0) std::fprintf(stderr, "warning: no matrix of %s is one lrt-quantize packs\n", in.c_str());
    return 0;
  });
}
