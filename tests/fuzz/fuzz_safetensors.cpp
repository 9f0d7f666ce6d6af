// libFuzzer target for lrt's untrusted-input parsers: the input is parsed as a safetensors
// file (every tensor read back as float, double and int; its metadata read as a checkpoint's
// model config and schedule) and as JSON (a parsed value must dump and re-parse to itself, and is
// read as a release config). Anything but lrt::Error escaping, or a sanitizer report, is a bug.
// scripts/test.sh runs it for a bounded time on every CI run (tests/fuzz/corpus: the seeds).
//   ./lrt_fuzz_safetensors -max_len=4096 corpus_dir/
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <lrt/io.hpp>
#include <lrt/model/checkpoint.hpp>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto r = lrt::st::Reader::from_bytes(bytes, "fuzz");
    try {
      (void)lrt::read_model_config(r);
    } catch (const lrt::Error&) {
    }
    try {
      (void)lrt::checkpoint_schedule(r);
    } catch (const lrt::Error&) {
    }
    for (const std::string& name : r.names()) {
      const auto shape = r.shape(name);
      try {
        (void)r.read_f32(name, shape);
      } catch (const lrt::Error&) {
      }
      try {
        (void)r.read_f64(name, shape);
      } catch (const lrt::Error&) {
      }
      try {
        (void)r.read_i64(name, shape);
      } catch (const lrt::Error&) {
      }
    }
  } catch (const lrt::Error&) {
  }
  try {
    const lrt::json::Value v = lrt::json::parse(bytes, "fuzz");
    std::string text;
    try {
      text = v.dump();
    } catch (const lrt::Error&) {
      return 0;  // only non-finite numbers cannot be written, and the parser makes none
    }
    if (!(lrt::json::parse(text) == v)) std::abort();
    try {
      (void)lrt::config_from_json(v);
    } catch (const lrt::Error&) {
    }
    try {
      (void)lrt::release_schedule_from_json(v);
    } catch (const lrt::Error&) {
    }
  } catch (const lrt::Error&) {
  }
  return 0;
}
