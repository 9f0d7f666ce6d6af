// tests/tree/include_layers.cpp: the layering of include/lrt/, checked over the files themselves.
//
//   lrt_include_layers <include dir>     (the directory that holds lrt/)
//
// The library is a chain of layers; a header may include its own layer and the layers below it,
// never one above, never a sibling of the same rank, and never an umbrella header (lrt/*.hpp: those
// are for users, so that a header says exactly what it builds on):
//
//   0 core            config, errors, shapes, devices, the thread pool
//   1 io | tensor | tokenizer   files, JSON, safetensors | tensors, views, expressions | the BPE tokenizer
//   2 backend         backend/*.hpp (device-neutral interfaces) <- backend/cpu, backend/cuda
//   3 autodiff | data the graph and the differentiable ops | corpora, tokenizers, batches
//   4 optim | model   AdamW, Muon | the GPT/LRT model, its config, checkpoints, training schedules
//   5 decode          the KV-cache decoder and the sampler
//   6 eval            in-context-learning evaluation (CORE): bundles, prompts, scoring
//   7 train           the Trainer and evaluation
//   8 runtime         the compiled runtime: its light headers (runtime/decoding.hpp), their
//                     implementations, and the C API over them (runtime/c_api.hpp)
//
// Further rules, checked over each header's transitive includes:
//   - backend/cpu and backend/cuda never include each other; the neutral backend headers neither;
//   - autodiff/ reaches no device's kernels (no Eigen, no fmt, no backend/cpu kernels, no CUDA): it
//     is written against the neutral interfaces, and a user picks the backend by including it;
//   - nothing but tensor/format.hpp (and the umbrellas) reaches fmt, so that nvcc takes the rest.
// Prints every violation as "file: includes target: rule" and exits 1 if there is any.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Layer {
  int rank;
  std::string group;  // files of one group may include each other
};

// "core/error.hpp" -> {0, "core"}; umbrellas ("lrt.hpp") -> {-1, ""}
Layer layer_of(const std::string& rel) {
  const auto slash = rel.find('/');
  if (slash == std::string::npos) return {-1, ""};
  const std::string top = rel.substr(0, slash);
  static const std::map<std::string, int> ranks = {
      {"core", 0}, {"dist", 1},  {"io", 1},    {"tensor", 1}, {"tokenizer", 1}, {"backend", 2}, {"autodiff", 3},
      {"data", 3}, {"optim", 4}, {"model", 4}, {"decode", 5}, {"eval", 6},      {"train", 7},   {"runtime", 8}};
  const auto it = ranks.find(top);
  if (it == ranks.end()) return {100, top};  // an unknown folder: reported below
  if (top == "backend") {                    // backend/x.hpp: the neutral interfaces; backend/cpu, backend/cuda
    const auto second = rel.find('/', slash + 1);
    return {2, second == std::string::npos ? "backend" : rel.substr(0, second)};
  }
  return {it->second, top};
}

struct Include {
  std::string target;  // relative to include/lrt for lrt headers, else the <name> as written
  bool lrt;
  int line;
};

std::vector<Include> includes_of(const fs::path& root, const fs::path& file) {
  static const std::regex quoted(R"re(^\s*#\s*include\s*"([^"]+)")re"), angled(R"re(^\s*#\s*include\s*<([^>]+)>)re");
  std::vector<Include> out;
  std::ifstream in(file);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::smatch m;
    if (std::regex_search(line, m, quoted)) {
      const fs::path p = (file.parent_path() / m[1].str()).lexically_normal();
      out.push_back({p.lexically_relative(root).generic_string(), true, n});
    } else if (std::regex_search(line, m, angled)) {
      const std::string t = m[1].str();
      if (t.rfind("lrt/", 0) == 0)
        out.push_back({t.substr(4), true, n});
      else
        out.push_back({t, false, n});
    }
  }
  return out;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: lrt_include_layers <include dir (the one that holds lrt/)>\n";
    return 2;
  }
  const fs::path root = fs::path(argv[1]) / "lrt";
  if (!fs::is_directory(root)) {
    std::cerr << "lrt_include_layers: " << root << " is not a directory\n";
    return 2;
  }
  std::map<std::string, std::vector<Include>> graph;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    const auto ext = e.path().extension();
    if (ext != ".hpp" && ext != ".cuh" && ext != ".h") continue;
    graph[e.path().lexically_relative(root).generic_string()] = includes_of(root, e.path());
  }
  int violations = 0;
  auto report = [&](const std::string& file, int line, const std::string& target, const std::string& rule) {
    std::cout << "include/lrt/" << file << ":" << line << ": includes " << target << ": " << rule << "\n";
    ++violations;
  };

  // Direct edges: ranks, siblings, umbrellas, unknown files.
  for (const auto& [file, incs] : graph) {
    const Layer a = layer_of(file);
    if (a.rank == 100) report(file, 0, "", "folder '" + a.group + "' has no place in the layer chain");
    if (a.rank < 0) continue;  // umbrellas may include anything
    for (const auto& inc : incs) {
      if (!inc.lrt) continue;
      if (!graph.count(inc.target)) {
        report(file, inc.line, inc.target, "no such header");
        continue;
      }
      const Layer b = layer_of(inc.target);
      if (b.rank < 0)
        report(file, inc.line, inc.target, "an umbrella header; include the headers it is built from");
      else if (b.group == a.group)
        continue;
      else if (a.group == "backend/cpu" || a.group == "backend/cuda") {
        if (b.rank > 2 || (b.rank == 2 && b.group != "backend"))
          report(file, inc.line, inc.target,
                 a.group + " may include the neutral backend headers and lower layers only");
      } else if (b.rank >= a.rank)
        report(file, inc.line, inc.target,
               "layer " + b.group + " (" + std::to_string(b.rank) + ") is not below " + a.group + " (" +
                   std::to_string(a.rank) + ")");
    }
  }

  // Transitive rules.
  auto closure = [&](const std::string& start) {
    std::set<std::string> seen;  // lrt headers and "<external>" names
    std::vector<std::string> todo{start};
    while (!todo.empty()) {
      const std::string f = todo.back();
      todo.pop_back();
      const auto it = graph.find(f);
      if (it == graph.end()) continue;
      for (const auto& inc : it->second) {
        const std::string key = inc.lrt ? inc.target : "<" + inc.target + ">";
        if (seen.insert(key).second && inc.lrt) todo.push_back(inc.target);
      }
    }
    return seen;
  };
  for (const auto& [file, incs] : graph) {
    const Layer a = layer_of(file);
    if (a.rank < 0) continue;
    const auto reach = closure(file);
    for (const auto& r : reach) {
      if (a.group == "autodiff") {
        if (starts_with(r, "<Eigen/") || starts_with(r, "<fmt/") || starts_with(r, "<cuda") ||
            starts_with(r, "<cublas") || starts_with(r, "backend/cuda/") ||
            (starts_with(r, "backend/cpu/") && r != "backend/cpu/device.hpp" && r != "backend/cpu/allocator.hpp"))
          report(file, 0, r,
                 "autodiff is written against the neutral interfaces; it reaches no device's kernels "
                 "(the host's memory, backend/cpu/device.hpp, is allowed)");
      }
      if ((a.group == "backend/cpu" && starts_with(r, "backend/cuda/")) ||
          (a.group == "backend/cuda" && starts_with(r, "backend/cpu/")) ||
          (a.group == "backend" && (starts_with(r, "backend/cpu/") || starts_with(r, "backend/cuda/"))))
        report(file, 0, r, "one backend does not build on another (nor the neutral interface on either)");
      if (starts_with(r, "<fmt/") && file != "tensor/format.hpp")
        report(file, 0, r, "fmt is for the umbrellas (nvcc cannot take it): only tensor/format.hpp uses it");
    }
  }
  if (violations) {
    std::cout << violations << " layering violation(s) in " << root.generic_string() << "\n";
    return 1;
  }
  std::cout << "include/lrt: " << graph.size() << " headers, layers respected\n";
  return 0;
}
