// libFuzzer target for lrt's untrusted-input parsers: the input is parsed as a safetensors file
// (every tensor read back as float, double and int; its metadata read as a checkpoint's model
// config and schedule, and through the one loader, read_checkpoint, whose two forms must agree;
// the lean decoder's weights viewed in it) and as JSON (a parsed value must dump and re-parse to
// itself, and is read as a release config). Anything but lrt::Error escaping, or a sanitizer
// report, is a bug. scripts/test.sh runs it for a bounded time on every CI run (tests/fuzz/corpus:
// the seeds).
//   ./lrt_fuzz_safetensors -max_len=4096 corpus_dir/
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <lrt/io.hpp>
#include <lrt/decode/lean_file.hpp>
#include <lrt/model/checkpoint.hpp>
#include <string>
#include <string_view>

namespace {
/// Runs f; an lrt::Error is the parser's clear answer to bad input, anything else escapes.
template <class F>
void rejects_cleanly(F&& f) {
  try {
    f();
  } catch (const lrt::Error&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  rejects_cleanly([&] {
    const auto r = lrt::st::Reader::from_bytes(bytes, "fuzz");
    rejects_cleanly([&] {
      // The lean decoder's view of the file (decode/lean_file.hpp): a Status for what is wrong,
      // for the file's own config and a tiny fixed one.
      lrt::ModelConfig tiny;
      tiny.n_layer = 1, tiny.n_embd = 4, tiny.n_head = 1, tiny.n_kv_head = 1, tiny.vocab_size = 2;
      lrt::LeanWeights<float> w;
      std::vector<std::byte> spill;
      (void)lrt::lean_file_weights<lrt::variants::Lrt>(r, tiny, w, spill);
      (void)lrt::lean_file_weights<lrt::variants::Baseline>(r, lrt::read_model_config(r), w, spill);
    });
    rejects_cleanly([&] { (void)lrt::checkpoint_schedule(r); });
    // The one loader (model/checkpoint_file.hpp): its Status form throws nothing (with
    // exceptions), and its throwing form fails with the same message.
    {
      lrt::CheckpointInfo info;
      const lrt::Status s = lrt::read_checkpoint(r, info);
      try {
        (void)lrt::read_checkpoint(r);
        if (!s.ok()) std::abort();
      } catch (const lrt::Error& e) {
        if (s.ok()) std::abort();
      }
    }
    for (const std::string& name : r.names()) {
      const auto shape = r.shape(name);
      rejects_cleanly([&] { (void)r.read_f32(name, shape); });
      rejects_cleanly([&] { (void)r.read_f64(name, shape); });
      rejects_cleanly([&] { (void)r.read_i64(name, shape); });
    }
  });
  rejects_cleanly([&] {
    const lrt::json::Value v = lrt::json::parse(bytes, "fuzz");
    std::string text;
    try {
      text = v.dump();
    } catch (const lrt::Error&) {
      return;  // only non-finite numbers cannot be written, and the parser makes none
    }
    if (!(lrt::json::parse(text) == v)) std::abort();
    rejects_cleanly([&] { (void)lrt::config_from_json(v); });
    rejects_cleanly([&] { (void)lrt::release_schedule_from_json(v); });
  });
  return 0;
}
