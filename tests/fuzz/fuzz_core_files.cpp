// libFuzzer target for the parsers of a CORE bundle's text files: the input is read as YAML
// (lrt::yaml::parse, core.yaml's subset; a document it accepts must dump as JSON that re-parses
// to the same value), as CSV records (lrt::eval::csv_record, eval_meta_data.csv) and through
// py_strip (Python's str.strip over possibly invalid UTF-8). Anything but lrt::Error escaping,
// or a sanitizer report, is a bug. tests/fuzz/corpus_yaml: the seeds.
//   ./lrt_fuzz_core_files -max_len=4096 corpus_yaml/
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <lrt/eval/core.hpp>
#include <lrt/io/json.hpp>
#include <lrt/io/yaml.hpp>
#include <optional>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::optional<lrt::json::Value> v;
  try {
    v = lrt::yaml::parse(bytes, "fuzz");
  } catch (const lrt::Error&) {
  }
  if (v && !(lrt::json::parse(v->dump(), "again") == *v)) std::abort();  // a throw here escapes too
  try {
    std::size_t pos = 0;
    int line = 1;
    while (pos < bytes.size()) {
      const std::size_t before = pos;
      (void)lrt::eval::csv_record(bytes, pos, line, "fuzz");
      if (pos <= before) std::abort();  // every record consumes input
    }
  } catch (const lrt::Error&) {
  }
  const std::string s = lrt::eval::py_strip(bytes);
  if (s.size() > bytes.size() || bytes.find(s) == std::string_view::npos) std::abort();
  return 0;
}
