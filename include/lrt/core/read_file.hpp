// lrt/core/read_file.hpp: a whole file's bytes, or an lrt::Error naming the file and the system's
// reason. Every reader of lrt goes through it (io/file.hpp, the corpus loader, the tokenizer's
// file); in core so that every layer may use it.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "error.hpp"

namespace lrt {
inline namespace v0 {

/// The whole content of a file; lrt::Error(op, "'path': cannot open: <strerror>") and the like.
inline std::string read_file(const std::string& path, std::string_view op) {
  const std::string sop(op);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) ::lrt::throw_error(sop, "'" + path + "': cannot open: " + std::strerror(errno));
  std::string out;
  struct stat st {};
  if (::fstat(::fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buf, 1, sizeof buf, f);
    out.append(buf, n);
    if (n < sizeof buf) break;
  }
  const int err = std::ferror(f) ? errno : 0;  // a directory opens, then fails here (EISDIR)
  std::fclose(f);
  if (err) ::lrt::throw_error(sop, "'" + path + "': cannot read: " + std::strerror(err));
  return out;
}

}  // namespace v0
}  // namespace lrt
