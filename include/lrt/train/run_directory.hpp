// lrt/train/run_directory.hpp: a training run on disk: where Trainer::save writes its checkpoints,
// how resume finds the newest complete one, and the optimizer-state file beside the model.
//
// A checkpoint is a directory holding model.safetensors (weights + config) and optim.safetensors
// (optimizer moments, step, horizon, data cursor), plus whatever files the caller adds (lrt-train:
// log.csv up to that step). Trainer::save(DIR) writes the run directory DIR as
//   DIR/checkpoints/step-000020/   one checkpoint, written as a unit: its files go into
//                                  DIR/checkpoints/.tmp-step-000020.<pid>/, are fsynced, and the
//                                  directory is renamed into place as a whole (then fsynced);
//   DIR/latest                     "checkpoints/step-000020\n", replaced atomically afterwards: the
//                                  commit point; resume(DIR) continues from what it names;
//   DIR/model.safetensors,         hard links to the latest checkpoint's files (copies where the
//   DIR/optim.safetensors          filesystem has no hard links), refreshed after `latest` for
//                                  lrt-eval / lrt-generate and for readers of the one-level layout;
//                                  after a crash they may lag one checkpoint behind `latest`;
// and keeps the newest keep_checkpoints() step directories (3 by default): older ones are removed
// only once the new one is committed. A kill at any moment leaves `latest` naming a complete
// checkpoint; an error (full disk, EFBIG under `ulimit -f`, no permission) is an lrt::Error naming
// the file and the errno text, the temporary directory is removed and the previous checkpoint is
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../data/loader.hpp"
#include "../dist/group.hpp"
#include "../io/file.hpp"
#include "../io/json.hpp"
#include "../io/safetensors.hpp"
#include "../model/checkpoint_file.hpp"
#include "../optim/param_ref.hpp"

namespace lrt {
inline namespace v0 {

/// A checkpoint found on disk (find_checkpoint): the directory holding its model.safetensors and
/// optim.safetensors, their step, and a note when DIR/latest could not be used.
struct CheckpointLocation {
  std::string dir;  // a step directory, or the directory itself for the one-level layout
  std::int64_t step = 0;
  std::string note;  // non-empty: why `latest` was not used, and what was used instead
  std::string model_path() const { return dir + "/model.safetensors"; }
  std::string optim_path() const { return dir + "/optim.safetensors"; }
};

/// "step-000020": the name of a step directory under DIR/checkpoints.
inline std::string checkpoint_dir_name(std::int64_t step) {
  char b[40];
  std::snprintf(b, sizeof b, "step-%06lld", static_cast<long long>(step));
  return b;
}
/// The step of a name written by checkpoint_dir_name ("step-" and digits only), else nothing.
inline std::optional<std::int64_t> parse_checkpoint_dir_name(std::string_view name) {
  constexpr std::string_view prefix = "step-";
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 18 || name.substr(0, prefix.size()) != prefix)
    return std::nullopt;
  std::int64_t v = 0;
  for (const char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

namespace detail {
/// The step directories under `ckdir` as (step, name), newest first (none when it is missing).
inline std::vector<std::pair<std::int64_t, std::string>> step_dirs(const std::string& ckdir) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(ckdir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (const auto s = parse_checkpoint_dir_name(name); s && it->is_directory(ec)) out.emplace_back(*s, name);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

/// A consistent checkpoint in `dir` (both files readable, the same step, and the step of the
/// directory's name when it has one), or nothing with the reason in `why`.
struct OpenedCheckpoint {
  CheckpointLocation where;
  std::optional<st::Reader> model, optim;
};
inline std::optional<OpenedCheckpoint> open_checkpoint_dir(const std::string& dir, std::string& why) {
  OpenedCheckpoint c;
  c.where.dir = dir;
  std::error_code ec;
  for (const std::string& f : {c.where.model_path(), c.where.optim_path()})
    if (!std::filesystem::is_regular_file(f, ec)) {
      why = "'" + f + "' is missing";
      return std::nullopt;
    }
  try {
    c.model = st::Reader::open(c.where.model_path());
    c.optim = st::Reader::open(c.where.optim_path());
    const std::int64_t ms = read_step(*c.model), os = read_step(*c.optim);
    if (ms != os) {
      why = "'" + dir + "': model.safetensors is at step " + std::to_string(ms) + " but optim.safetensors at step " +
            std::to_string(os) + " (an interrupted save?)";
      return std::nullopt;
    }
    const auto named = parse_checkpoint_dir_name(std::filesystem::path(dir).filename().string());
    if (named && *named != ms) {
      why = "'" + dir + "' holds a checkpoint of step " + std::to_string(ms);
      return std::nullopt;
    }
    c.where.step = ms;
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
  return c;
}

/// find_checkpoint, keeping the files it read.
inline OpenedCheckpoint open_checkpoint(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string latest = path + "/latest", ckdir = path + "/checkpoints";
  std::string why;
  if (fs::exists(latest, ec) || fs::is_directory(ckdir, ec)) {  // the step-directory layout
    if (fs::exists(latest, ec)) {
      std::string name;
      try {
        name = read_file(latest, "checkpoint");
      } catch (const Error& e) {
        why = e.what();
      }
      while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
      if (why.empty() && name.empty()) why = "'" + latest + "' is empty";
      if (why.empty()) {
        const std::string dir = fs::path(name).is_absolute() ? name : path + "/" + name;
        std::string w;
        if (auto c = open_checkpoint_dir(dir, w)) return std::move(*c);
        why = "'" + latest + "' names '" + name + "', which is not a complete checkpoint: " + w;
      }
    } else {
      why = "no '" + latest + "'";
    }
    for (const auto& [step, name] : step_dirs(ckdir)) {
      std::string w;
      if (auto c = open_checkpoint_dir(ckdir + "/" + name, w)) {
        c->where.note =
            why + "; using the newest complete checkpoint, '" + c->where.dir + "' (step " + std::to_string(step) + ")";
        return std::move(*c);
      }
    }
    std::string w;
    if (auto c = open_checkpoint_dir(path, w)) {  // the links next to `latest`, if they agree
      c->where.note = why + ", and no complete directory in '" + ckdir + "'; using '" + c->where.model_path() +
                      "' and '" + c->where.optim_path() + "' (step " + std::to_string(c->where.step) + ")";
      return std::move(*c);
    }
    ::lrt::throw_error("checkpoint", "'" + path + "': no complete checkpoint: " + why + ", no complete directory in '" +
                                         ckdir + "', and " + w);
  }
  // A step directory itself, or a run written in the one-level layout (DIR/model + DIR/optim).
  if (!fs::is_directory(path, ec)) ::lrt::throw_error("checkpoint", "'" + path + "': no such checkpoint directory");
  if (auto c = open_checkpoint_dir(path, why)) return std::move(*c);
  ::lrt::throw_error("checkpoint", why);
}

/// Moves the finished temporary directory `tmp` to `dst`. An existing `dst` (the same step saved
/// again) is swapped out atomically where the system can (Linux renameat2), and removed.
inline void move_into_place(const std::string& tmp, const std::string& dst) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (::rename(tmp.c_str(), dst.c_str()) == 0) return;
  int err = errno;
  if (err == EEXIST || err == ENOTEMPTY) {
#if defined(__linux__) && defined(RENAME_EXCHANGE)
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dst.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(tmp, ec);  // now the old content
      return;
    }
#endif
    const std::string old = tmp + ".old";
    if (::rename(dst.c_str(), old.c_str()) == 0) {
      if (::rename(tmp.c_str(), dst.c_str()) == 0) {
        fs::remove_all(old, ec);
        return;
      }
      err = errno;
      ::rename(old.c_str(), dst.c_str());
    } else {
      err = errno;
    }
  }
  ::lrt::throw_error("write", "'" + dst + "': cannot move the new checkpoint into place: " + std::strerror(err));
}

/// Whether `name` is a temporary that write_file_atomic or replace_with_link of another process
/// left for one of `files` ("<file>.tmp.<pid>", the pid not this one's).
inline bool is_stale_temporary(std::string_view name, std::initializer_list<std::string_view> files) {
  const std::string mine = std::to_string(::getpid());
  for (const std::string_view f : files) {
    if (name.size() <= f.size() + 5 || name.substr(0, f.size()) != f || name.substr(f.size(), 5) != ".tmp.") continue;
    const std::string_view pid = name.substr(f.size() + 5);
    if (pid != mine && pid.find_first_not_of("0123456789") == std::string_view::npos) return true;
  }
  return false;
}

/// Removes what a killed save leaves behind: DIR/checkpoints/.tmp-* directories and the temporaries
/// of write_file_atomic / replace_with_link for latest, model.safetensors, optim.safetensors and
/// the caller's `files` (a program's logs, written next to them).
inline void remove_stale_save_files(const std::string& dir, const std::string& ckdir,
                                    std::initializer_list<std::string_view> files = {}) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it(ckdir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    std::error_code rc;
    if (n.rfind(".tmp-", 0) == 0) fs::remove_all(it->path(), rc);
  }
  ec.clear();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    std::error_code rc;
    if (is_stale_temporary(n, {"latest", "model.safetensors", "optim.safetensors"}) || is_stale_temporary(n, files))
      fs::remove(it->path(), rc);
  }
}
}  // namespace detail

/// The checkpoint that resume(path) continues from. `path` is
///  - a run directory written by Trainer::save: the step directory DIR/latest names; when that is
///    missing or incomplete, the newest complete DIR/checkpoints/step-* (with a note saying so),
///    and last DIR/model.safetensors + DIR/optim.safetensors if they agree;
///  - a step directory (DIR/checkpoints/step-000020), or a run directory of the one-level layout
///    written before step directories (DIR/model.safetensors + DIR/optim.safetensors).
/// Complete means both files parse and carry the same step. lrt::Error("resume", ...) saying what
/// was tried when there is none.
inline CheckpointLocation find_checkpoint(const std::string& path) { return detail::open_checkpoint(path).where; }

/// What optim.safetensors holds: the optimizers' buffers and counters, the step, the horizon of
/// the schedules and the data cursor (plus the options, written for people and not read back).
struct OptimizerState {
  std::vector<optim::NamedBuffer> buffers;
  std::map<std::string, std::int64_t> counters;
  data::LoaderState loader;
  std::int64_t step = 0, horizon = 0;
};

/// Writes optim.safetensors at `path` (`options`: the TrainOptions as JSON, for the record).
inline void write_optimizer_state(const std::string& path, const OptimizerState& s, const json::Value& options) {
  st::Writer w;
  for (const auto& b : s.buffers) w.add_f32(b.name, b.data, b.shape);
  json::Value c = json::Value::object();
  for (const auto& [k, v] : s.counters) c[k] = v;
  json::Value l = json::Value::object();
  l["seed"] = static_cast<std::int64_t>(s.loader.seed), l["epoch"] = static_cast<std::int64_t>(s.loader.epoch);
  l["position"] = static_cast<std::int64_t>(s.loader.position);
  w.set_metadata("step", std::to_string(s.step));
  w.set_metadata("horizon", std::to_string(s.horizon));
  w.set_metadata("counters", c.dump());
  w.set_metadata("loader", l.dump());
  w.set_metadata("train_options", options.dump());
  w.write(path);
}

/// Reads what write_optimizer_state wrote. Errors: lrt::Error("resume", ...) naming the file and
/// the missing field.
inline OptimizerState read_optimizer_state(const st::Reader& r) {
  OptimizerState s;
  for (const std::string& n : r.names()) {
    optim::NamedBuffer b;
    b.name = n;
    b.shape = r.shape(n);
    b.data = r.read_f32(n, b.shape);
    s.buffers.push_back(std::move(b));
  }
  auto meta_json = [&](const char* key) {
    const auto v = r.meta(key);
    check(v.has_value(), "resume", "'", r.label(), "': no '", key, "' in __metadata__");
    return json::parse(*v, "'" + r.label() + "' " + key);
  };
  const json::Value cj = meta_json("counters");
  for (const auto& [k, v] : cj.members()) s.counters[k] = v.as_int();
  const json::Value l = meta_json("loader");
  s.loader.seed = static_cast<std::uint64_t>(l.at("seed").as_int());
  s.loader.epoch = static_cast<std::uint64_t>(l.at("epoch").as_int());
  s.loader.position = static_cast<std::uint64_t>(l.at("position").as_int());
  const auto h = r.meta("horizon");
  check(h.has_value(), "resume", "'", r.label(), "': no 'horizon' in __metadata__");
  s.horizon = std::stoll(*h);
  s.step = read_step(r);
  return s;
}

/// Data-parallel training: each rank holds the optimizer state of the parameters it owns. This
/// gathers every rank's buffers and counters onto every rank, in rank order (collective; a no-op
/// for one process). The caller puts them in one process's order.
inline void gather_optimizer_state(dist::Group& g, OptimizerState& s) {
  if (g.size() == 1) return;
  std::string mine;
  auto put = [&](const void* p, std::size_t n) { mine.append(static_cast<const char*>(p), n); };
  auto put64 = [&](std::int64_t v) { put(&v, sizeof v); };
  put64(static_cast<std::int64_t>(s.buffers.size()));
  for (const auto& b : s.buffers) {
    put64(static_cast<std::int64_t>(b.name.size())), put(b.name.data(), b.name.size());
    put64(static_cast<std::int64_t>(b.shape.size()));
    for (const auto d : b.shape) put64(d);
    put64(static_cast<std::int64_t>(b.data.size())), put(b.data.data(), sizeof(float) * b.data.size());
  }
  put64(static_cast<std::int64_t>(s.counters.size()));
  for (const auto& [k, v] : s.counters) put64(static_cast<std::int64_t>(k.size())), put(k.data(), k.size()), put64(v);
  const std::vector<std::string> all = g.exchange(
      mine, ("the gathering of optimizer state for the checkpoint of step " + std::to_string(s.step)).c_str());
  s.buffers.clear();
  std::map<std::string, std::int64_t> merged;
  for (const std::string& x : all) {
    std::size_t at = 0;
    auto get = [&](void* p, std::size_t n) {
      check(at + n <= x.size(), "save", "optimizer state from another rank is truncated");
      std::memcpy(p, x.data() + at, n);
      at += n;
    };
    auto get64 = [&] {
      std::int64_t v;
      get(&v, sizeof v);
      return v;
    };
    const std::int64_t nb = get64();
    for (std::int64_t k = 0; k < nb; ++k) {
      optim::NamedBuffer b;
      b.name.resize(static_cast<std::size_t>(get64()));
      get(b.name.data(), b.name.size());
      b.shape.resize(static_cast<std::size_t>(get64()));
      for (auto& d : b.shape) d = get64();
      b.data.resize(static_cast<std::size_t>(get64()));
      get(b.data.data(), sizeof(float) * b.data.size());
      s.buffers.push_back(std::move(b));
    }
    const std::int64_t nc = get64();
    for (std::int64_t k = 0; k < nc; ++k) {
      std::string key(static_cast<std::size_t>(get64()), '\0');
      get(key.data(), key.size());
      merged[key] = get64();
    }
  }
  s.counters = std::move(merged);
}

/// Saves the checkpoint of step `step` into the run directory DIR as a unit (the layout at the
/// top of this file): `write(tmp)` writes model.safetensors and optim.safetensors into the
/// temporary directory, then `extra_files` (name, bytes) are added, the directory is moved into
/// place as DIR/checkpoints/step-NNNNNN, DIR/latest is replaced (the commit point) and the
/// DIR/model.safetensors and DIR/optim.safetensors links refreshed; then the step directories
/// beyond the newest `keep`, and those of later steps (left by a run that went further before
/// this one resumed from an earlier checkpoint into the same directory), are removed. Returns the
/// step directory. Errors: lrt::Error("save", ...) naming the file and the system's reason; the
/// temporary directory is removed and the previous checkpoint (what DIR/latest names) is left as
/// it was.
inline std::string commit_checkpoint(const std::string& dir, std::int64_t step, int keep,
                                     const std::function<void(const std::string& tmp)>& write,
                                     const std::vector<std::pair<std::string, std::string>>& extra_files = {}) {
  namespace fs = std::filesystem;
  const std::string ckdir = dir + "/checkpoints", name = checkpoint_dir_name(step);
  const std::string final_dir = ckdir + "/" + name;
  const std::string tmp = ckdir + "/.tmp-" + name + "." + std::to_string(::getpid());
  const std::string what = "'" + dir + "': the checkpoint of step " + std::to_string(step);
  std::error_code ec;
  try {
    ensure_directory(dir);
    ensure_directory(ckdir);
    detail::remove_stale_save_files(dir, ckdir);
    fs::remove_all(tmp, ec);
    if (::mkdir(tmp.c_str(), 0777) != 0)
      ::lrt::throw_error("mkdir", "'" + tmp + "': cannot create directory: " + std::strerror(errno));
    write(tmp);
    for (const auto& [file, bytes] : extra_files) {
      check(!file.empty() && file.find('/') == std::string::npos && file != "model.safetensors" &&
                file != "optim.safetensors",
            "save", "extra checkpoint file '", file, "': a plain file name other than model/optim.safetensors");
      write_file_atomic(tmp + "/" + file, bytes);
    }
    sync_directory(tmp);
    detail::move_into_place(tmp, final_dir);
    sync_directory(ckdir);
    write_file_atomic(dir + "/latest", "checkpoints/" + name + "\n");  // the commit point
  } catch (const Error& e) {
    fs::remove_all(tmp, ec);
    std::string before;
    try {
      std::string l = read_file(dir + "/latest", "save");
      while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
      before = "; '" + dir + "/latest' still names " + l + ", which is unchanged";
    } catch (const Error&) {
      if (fs::exists(dir + "/model.safetensors", ec)) before = "; the files already in '" + dir + "' are unchanged";
    }
    ::lrt::throw_error("save", what + " was not saved: " + e.what() + before);
  }
  // Today's names, for lrt-eval / lrt-generate: links to the committed files.
  try {
    replace_with_link(final_dir + "/model.safetensors", dir + "/model.safetensors");
    replace_with_link(final_dir + "/optim.safetensors", dir + "/optim.safetensors");
    sync_directory(dir);
  } catch (const Error& e) {
    ::lrt::throw_error("save", what + " is saved in '" + final_dir + "' (named by '" + dir +
                                   "/latest'), but refreshing the model.safetensors next to it failed: " + e.what());
  }
  int kept = 0;
  for (const auto& [s, n] : detail::step_dirs(ckdir)) {
    if (s <= step && kept < keep) {
      ++kept;
      continue;
    }
    if (n != name) fs::remove_all(ckdir + "/" + n, ec);
  }
  try {
    sync_directory(ckdir);
  } catch (const Error&) {  // only the removals, which a crash may undo harmlessly
  }
  return final_dir;
}

}  // namespace v0
}  // namespace lrt
