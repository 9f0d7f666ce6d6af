// lrt/io/mapped_file.hpp: MappedFile, a whole file mapped read-only into memory (POSIX mmap), for
// reading weights in place: nothing is copied, and the pages are the page cache's, shared by every
// process that maps the file. Errors come back as a Status (core/status.hpp), never a throw.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/status.hpp"

namespace lrt {
inline namespace v0 {

/// A read-only mapping of one file (empty until open() succeeds); move-only.
class MappedFile {
 public:
  MappedFile() noexcept = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  MappedFile& operator=(MappedFile&& o) noexcept {
    if (this != &o) {
      unmap();
      data_ = std::exchange(o.data_, nullptr), size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~MappedFile() { unmap(); }

  /// Maps the file at `path` (a regular file; an empty one maps to no bytes).
  Status open(const char* path) noexcept {
    unmap();
    if (!path) return Status::error(StatusCode::invalid_argument, "mmap", "the path is NULL");
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::error(StatusCode::bad_file, "mmap", "'", path, "': cannot open: ", std::strerror(errno));
    struct stat st {};
    Status s;
    if (::fstat(fd, &st) != 0) {
      s = Status::error(StatusCode::bad_file, "mmap", "'", path, "': cannot stat: ", std::strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
      s = Status::error(StatusCode::bad_file, "mmap", "'", path, "': not a regular file");
    } else if (st.st_size > 0) {
      void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED)
        s = Status::error(StatusCode::bad_file, "mmap", "'", path, "': cannot map ", st.st_size,
                          " bytes: ", std::strerror(errno));
      else
        data_ = static_cast<const char*>(p), size_ = static_cast<std::size_t>(st.st_size);
    }
    ::close(fd);
    return s;
  }

  const char* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::string_view bytes() const noexcept { return {data_, size_}; }

 private:
  void unmap() noexcept {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
    data_ = nullptr, size_ = 0;
  }
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace v0
}  // namespace lrt
