// lrt/io/file.hpp: whole-file reads, crash-safe (atomic) writes, directory creation and syncing,
// and atomically replaced hard links. POSIX: write_file_atomic relies on rename(2) replacing the
// target atomically and on fsync. Every failure is an lrt::Error naming the path and the errno text.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "../core/error.hpp"
#include "../core/read_file.hpp"  // read_file, here for its users

namespace lrt {
inline namespace v0 {

/// Replaces `path` with `bytes` so that a crash or error never leaves a damaged file: the bytes go
/// to "<path>.tmp.<pid>" in the same directory (rename is atomic only within a filesystem), which
/// is fsynced, renamed over the target, and the directory is fsynced so the rename itself survives
/// a power loss. On failure the temporary is removed and the old file is untouched.
inline void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const char* what, int err, bool remove_tmp) {
    if (remove_tmp) ::unlink(tmp.c_str());
    ::lrt::throw_error("write", "'" + path + "': " + what + ": " + std::strerror(err));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail("cannot create temporary file", errno, false);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ::ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail("cannot write", err, true);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot sync", err, true);
  }
  if (::close(fd) != 0) fail("cannot close", errno, true);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot replace", errno, true);

  // The new content is in place; make the directory entry durable. Some filesystems do not support
  // fsync on directories (EINVAL): nothing more can be done there.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    const int rc = ::fsync(dfd);
    const int err = errno;
    ::close(dfd);
    if (rc != 0 && err != EINVAL && err != ENOTSUP)
      ::lrt::throw_error("write", "'" + path + "': written, but syncing its directory failed: " + std::strerror(err));
  }
}

/// fsyncs a directory, so that the entries created, renamed or removed in it survive a power loss.
/// Filesystems without fsync on directories (EINVAL, ENOTSUP) are accepted as they are.
inline void sync_directory(const std::string& dir) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) ::lrt::throw_error("sync", "'" + dir + "': cannot open directory: " + std::strerror(errno));
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    ::lrt::throw_error("sync", "'" + dir + "': cannot sync directory: " + std::strerror(err));
}

/// Makes `path` another name of the existing file `target` (a hard link, made under a temporary
/// name and renamed over `path`, so `path` is always either the old or the new file). Where the
/// filesystem has no hard links (EPERM, ENOTSUP, EXDEV, EMLINK) the bytes are copied with
/// write_file_atomic instead. The directory of `path` is not synced (see sync_directory).
inline void replace_with_link(const std::string& target, const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::link(target.c_str(), tmp.c_str()) != 0) {
    const int err = errno;
    if (err == EPERM || err == ENOTSUP || err == EXDEV || err == EMLINK
#if defined(EOPNOTSUPP) && EOPNOTSUPP != ENOTSUP
        || err == EOPNOTSUPP
#endif
    ) {
      write_file_atomic(path, read_file(target, "write"));
      return;
    }
    ::lrt::throw_error("write", "'" + path + "': cannot link to '" + target + "': " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    ::lrt::throw_error("write", "'" + path + "': cannot replace: " + std::strerror(err));
  }
}

/// Creates `dir` and its parents when missing; lrt::Error("mkdir", ...) when that fails or the path
/// exists but is not a directory.
inline void ensure_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) ::lrt::throw_error("mkdir", "'" + dir + "': cannot create directory: " + ec.message());
  if (!std::filesystem::is_directory(dir, ec))
    ::lrt::throw_error("mkdir", "'" + dir + "': exists and is not a directory");
}

/// ensure_directory, then proves that this process may create files in `dir` (by creating and
/// removing an empty probe file: permissions, read-only mounts and ACLs all show, and root's
/// privileges are honoured as they are). lrt::Error("mkdir", "'dir': cannot create files in this
/// directory: Permission denied") and the like otherwise.
inline void ensure_writable_directory(const std::string& dir) {
  ensure_directory(dir);
  const std::string probe = dir + "/.lrt-write-probe." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    ::lrt::throw_error("mkdir", "'" + dir + "': cannot create files in this directory: " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace v0
}  // namespace lrt
