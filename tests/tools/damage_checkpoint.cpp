// tests/tools/damage_checkpoint.cpp: writes a damaged copy of a checkpoint, one kind of damage per
// call, for tests/tools/damaged_checkpoints.sh (every program must refuse each the same way).
//   lrt_damage_checkpoint IN OUT CASE
// CASE: nan (one weight of transformer.h.0.attn.c_q.weight is NaN), seqlen (model_config
// sequence_len 1e12), contradict (lrt_config's injection "none" under variant lrt), mem_offset
// (lrt_config mem_offset 1000000), truncated (the file cut in half), dtype (lm_head.weight stored
// as I64 zeros), missing (no lm_head.weight), shape (transformer.wte.weight's shape transposed),
// extra (one more tensor, extra.weight); unbuilt (an lrt checkpoint said to read its memory from
// block 0: a valid checkpoint of a variant no pair of the build has, both/shared/block0); badname
// (the metadata's variant "xyz", lrt_config intact); badjson (the header's JSON cut short by a
// closing brace where a value begins).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <lrt/io/file.hpp>
#include <lrt/io/json.hpp>
#include <lrt/io/safetensors.hpp>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fputs("usage: lrt_damage_checkpoint IN OUT CASE\n", stderr);
    return 2;
  }
  const std::string in = argv[1], out = argv[2], what = argv[3];
  try {
    if (what == "truncated") {
      const std::string bytes = lrt::read_file(in, "checkpoint");
      std::ofstream(out, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
      return 0;
    }
    if (what == "badjson") {  // {"__metadata__":... -> {"__metadata__"}... (same length)
      std::string bytes = lrt::read_file(in, "checkpoint");
      const std::size_t colon = bytes.find(':', 8);
      if (colon == std::string::npos) throw std::runtime_error("no ':' in the header");
      bytes[colon] = '}';
      std::ofstream(out, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      return 0;
    }
    const lrt::st::Reader r = lrt::st::Reader::open(in);
    lrt::st::Writer w;
    for (const auto& [k, v] : r.metadata()) {
      if (k == "model_config" && what == "seqlen") {
        lrt::json::Value j = lrt::json::parse(v);
        j["sequence_len"] = std::int64_t{1000000000000};  // 1e12, written as an integer
        w.set_metadata(k, j.dump());
      } else if (k == "lrt_config" && (what == "contradict" || what == "mem_offset" || what == "unbuilt")) {
        lrt::json::Value j = lrt::json::parse(v);
        if (what == "contradict")
          j["injection"] = "none";
        else if (what == "unbuilt")
          j["source_layer"] = std::int64_t{0};
        else
          j["mem_offset"] = 1000000;
        w.set_metadata(k, j.dump());
      } else if (k == "variant" && what == "unbuilt") {
        w.set_metadata(k, "both/shared/block0");
      } else if (k == "variant" && what == "badname") {
        w.set_metadata(k, "xyz");
      } else {
        w.set_metadata(k, v);
      }
    }
    for (const std::string& name : r.names()) {
      std::vector<std::int64_t> shape = r.shape(name);
      if (what == "missing" && name == "lm_head.weight") continue;
      std::vector<float> v = r.read_f32(name, shape);
      if (what == "nan" && name == "transformer.h.0.attn.c_q.weight") v[3] = std::numeric_limits<float>::quiet_NaN();
      if (what == "shape" && name == "transformer.wte.weight") std::swap(shape[0], shape[1]);
      if (what == "dtype" && name == "lm_head.weight") {
        const std::vector<std::int64_t> zeros(v.size(), 0);
        w.add_i64(name, zeros, shape);
        continue;
      }
      w.add_f32(name, v, shape);
    }
    if (what == "extra") w.add_f32("extra.weight", std::vector<float>{1, 2}, {2});
    w.write(out);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lrt_damage_checkpoint: %s\n", e.what());
    return 1;
  }
}
