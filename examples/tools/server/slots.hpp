// lrt-server's saved sessions (POST /slots/{id}?action=save|restore|erase, llama-server's slot
// API): the state a row's last request left in the prompt cache (its tokens and every position's
// state, prompt_cache.hpp), written to a safetensors file and read back into the cache, so that a
// conversation continues after a restart with the bits it would have had.
//
// The file: tensors `tokens` (I64 [n]) and `states` (F32 [n, S]); metadata `format` = lrt-slot,
// `version` = 1, `model` (a hash of the checkpoint file: the weights, their format and what the
// checkpoint records), `state_size` = S, and `checksum` (of the two tensors' bytes). A file is
// refused with one line when it is not a safetensors file, is truncated, was saved from another
// model, or its checksum, shapes or tokens do not hold; file names are confined to
// --slot-save-path (letters, digits, '.', '_' and '-', not starting with '.').
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <lrt/io/file.hpp>
#include <lrt/io/mapped_file.hpp>
#include <lrt/io/safetensors.hpp>

#include "api.hpp"

namespace server {

/// FNV-1a, 64 bits, over `bytes`, continuing from `h`.
inline std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h = 0xcbf29ce484222325ULL) {
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}
inline std::string hex64(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

/// The identity of the checkpoint `file`: the hash of its bytes (read through a mapping).
inline std::string model_identity(const std::string& file) {
  lrt::MappedFile m;
  lrt::throw_if_error(m.open(file.c_str()));
  return hex64(fnv1a(m.bytes()));
}

/// A saved session: the tokens a row was fed and the state of each position.
struct SlotFile {
  std::vector<std::int64_t> tokens;
  std::vector<float> states;  // (tokens.size(), state_size)
};

/// The path of `filename` in `dir`, or a 400 naming what is wrong with the name.
inline std::string slot_path(const std::string& dir, const std::string& filename) {
  const auto bad = [&](const std::string& why) {
    return ApiError{400, "filename '" + filename + "': " + why, "invalid_request_error", "filename", "invalid_value"};
  };
  if (filename.empty()) throw bad("empty");
  if (filename.size() > 200) throw bad("longer than 200 bytes");
  if (filename[0] == '.') throw bad("starts with '.'");
  for (const char c : filename)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      throw bad("only letters, digits, '.', '_' and '-' are allowed (the file stays in --slot-save-path)");
  return dir + "/" + filename;
}

inline std::string slot_checksum(const SlotFile& s) {
  std::uint64_t h =
      fnv1a(std::string_view(reinterpret_cast<const char*>(s.tokens.data()), s.tokens.size() * sizeof(std::int64_t)));
  h = fnv1a(std::string_view(reinterpret_cast<const char*>(s.states.data()), s.states.size() * sizeof(float)), h);
  return hex64(h);
}

/// Writes `s` to `path` (atomically: a reader never sees half a file); returns the bytes written.
inline std::size_t write_slot(const std::string& path, const SlotFile& s, const std::string& model,
                              std::int64_t state_size) {
  lrt::st::Writer w;
  w.set_metadata("format", "lrt-slot");
  w.set_metadata("version", "1");
  w.set_metadata("model", model);
  w.set_metadata("state_size", std::to_string(state_size));
  w.set_metadata("checksum", slot_checksum(s));
  const auto n = static_cast<std::int64_t>(s.tokens.size());
  w.add_i64("tokens", s.tokens, {n});
  w.add_f32("states", s.states, {n, state_size});
  const std::string bytes = w.serialize();
  lrt::write_file_atomic(path, bytes);
  return bytes.size();
}

/// Reads and checks a saved session for this server's model; an ApiError (400, or 404 when the
/// file does not exist) says in one line why it is refused.
inline SlotFile read_slot(const std::string& path, const std::string& filename, const std::string& model,
                          std::int64_t state_size, std::int64_t vocab_size, std::int64_t bos, std::int64_t capacity) {
  const auto refuse = [&](int status, const std::string& why) {
    return ApiError{status, "session file '" + filename + "': " + why, "invalid_request_error", "filename",
                    status == 404 ? "not_found" : "invalid_session"};
  };
  std::string bytes;
  try {
    bytes = lrt::read_file(path, "slot");
  } catch (const std::exception& e) {
    throw refuse(404, std::string("cannot be read: ") + e.what());
  }
  SlotFile s;
  std::string checksum;
  try {
    const lrt::st::Reader r = lrt::st::Reader::from_bytes(std::move(bytes), filename);
    if (r.meta("format").value_or("") != "lrt-slot" || r.meta("version").value_or("") != "1")
      throw refuse(400, "not a session file of lrt-server (format lrt-slot, version 1)");
    const std::string theirs = r.meta("model").value_or("?");
    if (theirs != model)
      throw refuse(400, "saved from another model (checkpoint hash " + theirs + "; this server's is " + model + ")");
    if (r.meta("state_size").value_or("") != std::to_string(state_size))
      throw refuse(400, "its positions hold " + r.meta("state_size").value_or("?") + " values; this model's " +
                            std::to_string(state_size));
    checksum = r.meta("checksum").value_or("");
    r.expect_names({"states", "tokens"});
    const std::vector<std::int64_t> shape = r.shape("tokens");
    if (shape.size() != 1 || shape[0] < 1 || shape[0] > capacity)
      throw refuse(400, "its token count is not in [1, " + std::to_string(capacity) + "] (--ctx)");
    s.tokens = r.read_i64("tokens", shape);
    s.states = r.read_f32("states", {shape[0], state_size});
  } catch (const ApiError&) {
    throw;
  } catch (const std::exception& e) {
    throw refuse(400, e.what());
  }
  if (slot_checksum(s) != checksum) throw refuse(400, "damaged: its checksum does not match its tokens and states");
  if (s.tokens[0] != bos) throw refuse(400, "its first token is not the BOS every sequence starts with");
  for (const std::int64_t t : s.tokens)
    if (t < 0 || t >= vocab_size)
      throw refuse(400,
                   "token id " + std::to_string(t) + " outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  return s;
}

}  // namespace server
