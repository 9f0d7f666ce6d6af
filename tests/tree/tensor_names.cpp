// tests/tree/tensor_names.cpp: the model's tensor names are spelled in one header,
// include/lrt/model/weight_table.hpp (the parameter table); every other header reads them from it.
//
//   lrt_tensor_names <include dir>     (the directory that holds lrt/)
//
// Scans the string literals of every header under lrt/ (.hpp, .cuh, .h; comments are skipped) but
// the table's, and reports each literal that spells a tensor name or a piece of one, as the
// release's layout (spec §9) writes them:
//   - a module path with a dot: "transformer.", "attn.", "mlp.", "lm_head.", "value_embeds.",
//     "interleaved_projections.", "interleaved_key_projections.", "interleaved_init_value_embeds.",
//     "W_v.", or ".wte", ".c_q", ".c_k", ".c_v", ".c_proj", ".c_fc", ".triple_gate", ".ve_gate",
//     ".W_v", ".weight";
//   - a name without one, as a word of its own: resid_lambdas, x0_lambdas, interleaved_lambdas.
// Prints "file:line: "literal": spells a tensor name ..." for each and exits 1 if there is any.
// tests/tree/bad_names holds a header with two stray names (tree.tensor_names_reports).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Literal {
  std::string text;
  int line;
};

/// The string literals of a C++ source, outside comments (escapes kept as written; raw strings
/// and character literals are skipped well enough for headers).
std::vector<Literal> literals_of(const fs::path& file) {
  std::ifstream in(file);
  const std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<Literal> out;
  int line = 1;
  for (std::size_t i = 0; i < src.size(); ++i) {
    const char c = src[i];
    if (c == '\n') {
      ++line;
    } else if (c == '/' && i + 1 < src.size() && src[i + 1] == '/') {
      while (i < src.size() && src[i] != '\n') ++i;
      --i;
    } else if (c == '/' && i + 1 < src.size() && src[i + 1] == '*') {
      i += 2;
      while (i + 1 < src.size() && !(src[i] == '*' && src[i + 1] == '/')) line += src[i++] == '\n';
      ++i;
    } else if (c == '\'') {  // a character literal ('"', '\'', or a digit separator: 1'000)
      if (i + 2 < src.size() && src[i + 1] == '\\')
        i += 3;
      else if (i + 2 < src.size() && src[i + 2] == '\'')
        i += 2;
    } else if (c == '"') {
      Literal lit{std::string(), line};
      for (++i; i < src.size() && src[i] != '"'; ++i) {
        if (src[i] == '\\' && i + 1 < src.size()) lit.text += src[i++];
        if (src[i] == '\n') ++line;
        lit.text += src[i];
      }
      out.push_back(std::move(lit));
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: lrt_tensor_names <include dir>\n";
    return 2;
  }
  const fs::path root = fs::path(argv[1]) / "lrt";
  if (!fs::is_directory(root)) {
    std::cerr << "lrt_tensor_names: no directory " << root << "\n";
    return 2;
  }
  const std::regex name(
      R"re((^|[^A-Za-z0-9_])(transformer|attn|mlp|lm_head|value_embeds|interleaved_projections|interleaved_key_projections|interleaved_init_value_embeds|W_v)\.)re"
      R"re(|\.(wte|c_q|c_k|c_v|c_proj|c_fc|triple_gate|ve_gate|W_v|weight)\b)re"
      R"re(|\b(resid_lambdas|x0_lambdas|interleaved_lambdas)\b)re");
  const fs::path table = fs::path("model") / "weight_table.hpp";
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".hpp" || ext == ".cuh" || ext == ".h")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  int stray = 0, scanned = 0;
  for (const fs::path& f : files) {
    const fs::path rel = f.lexically_relative(root);
    if (rel == table) continue;
    ++scanned;
    for (const Literal& l : literals_of(f))
      if (std::regex_search(l.text, name)) {
        std::cout << rel.generic_string() << ":" << l.line << ": \"" << l.text
                  << "\": spells a tensor name; take it from the parameter table (model/weight_table.hpp)\n";
        ++stray;
      }
  }
  std::cout << scanned << " headers scanned, " << stray << " stray tensor name" << (stray == 1 ? "" : "s") << "\n";
  return stray == 0 ? 0 : 1;
}
