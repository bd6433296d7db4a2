// text/documents.hpp — the documents of a corpus, read in a fixed order: text files, directories of
// them, and JSON Lines files with a "text" field.
//
//   * a text file is one document, or, with `separator`, the runs of lines between lines that are
//     exactly the separator (fortune files: "%");
//   * a .jsonl / .ndjson file holds one JSON object per line; its "text" string is a document;
//   * a directory is walked recursively in name order, taking regular files (not symlinks, not
//     hidden ones, none whose name matches an `exclude` glob).
// Empty documents are skipped. Text must be UTF-8: a document that is not is an IoError naming
// the file, the byte offset and the line, unless invalid_utf8 is kReplace, which replaces each
// maximal ill-formed subpart by U+FFFD (as Python's errors="replace" and node's TextDecoder do).
//
//   text::DocumentReader docs({"corpus/", "extra.jsonl"}, {.separator = "%"});
//   for (text::Document d; docs.next(d);) use(d.text);
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace axonn::text {

enum class InvalidUtf8 { kError, kReplace };

struct DocumentOptions {
  std::string separator;             // "": each text file is one document
  std::vector<std::string> exclude;  // file-name globs skipped inside directories (fnmatch)
  InvalidUtf8 invalid_utf8 = InvalidUtf8::kError;
};

struct Document {
  std::string text;
  size_t file = 0;     // index into DocumentReader::files()
  uint64_t line = 0;   // 1-based line where it starts
};

class DocumentReader {
 public:
  // Expands the inputs into files (IoError for an input that does not exist, a directory with no
  // files, or a file that cannot be read); nothing is read yet.
  DocumentReader(const std::vector<std::string>& inputs, DocumentOptions options);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  const std::vector<std::string>& files() const { return files_; }
  uint64_t total_bytes() const { return total_bytes_; }
  // The most documents the inputs can hold, where that is known before reading: each text file one
  // document (no separator, no JSON Lines), so the files that are not empty; nullopt otherwise.
  std::optional<uint64_t> max_documents() const;
  // Bytes of the files read so far (for progress).
  uint64_t bytes_read() const { return done_bytes_ + file_pos_; }

  // The next document, or false after the last. Throws IoError for text that is not UTF-8 (under
  // kError) and for a JSON Lines line that is not an object with a string "text".
  bool next(Document& doc);

 private:
  bool read_line(std::string& line);  // from the open file, without its '\n'; false at its end
  void open(size_t i);
  void close();
  void check_utf8(std::string& text, uint64_t offset, uint64_t line) const;
  bool next_in_file(Document& doc);

  DocumentOptions options_;
  std::vector<std::string> files_;
  std::vector<uint64_t> sizes_;
  uint64_t total_bytes_ = 0, done_bytes_ = 0;
  size_t current_ = 0;   // next file to open
  FILE* f_ = nullptr;    // the open file, if any
  bool jsonl_ = false;
  uint64_t file_pos_ = 0, line_no_ = 0;
  char* line_buf_ = nullptr;  // getline's buffer
  size_t line_cap_ = 0;
};

}  // namespace axonn::text
