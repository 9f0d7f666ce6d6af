// --checkpoint's path for the tools: a safetensors file, or a directory lrt-train wrote.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include <lrt/train/run_directory.hpp>

namespace tool {

/// --checkpoint: a safetensors file, or a directory lrt-train wrote (its latest complete
/// checkpoint, as --resume finds it: DIR/latest, else the newest step directory).
inline std::string checkpoint_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path;
  const lrt::CheckpointLocation at = lrt::find_checkpoint(path);
  if (!at.note.empty()) std::fprintf(stderr, "warning: %s\n", at.note.c_str());
  return at.model_path();
}

}  // namespace tool
