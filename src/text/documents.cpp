#include "axonn/text/documents.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "axonn/core/error.hpp"
#include "axonn/text/utf8.hpp"

namespace axonn::text {

namespace {

namespace fs = std::filesystem;

bool excluded(const std::string& name, const std::vector<std::string>& globs) {
  for (const auto& g : globs)
    if (::fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

bool is_jsonl(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".jsonl" || ext == ".ndjson";
}

}  // namespace

DocumentReader::DocumentReader(const std::vector<std::string>& inputs, DocumentOptions options)
    : options_(std::move(options)) {
  AXONN_CHECK_ARG(!inputs.empty(), "no input given: name text files, JSON Lines files or directories");
  for (const auto& in : inputs) {
    std::error_code ec;
    const fs::path p(in);
    AXONN_CHECK_IO(fs::exists(p, ec), "cannot open input '", in, "': no such file or directory");
    if (!fs::is_directory(p, ec)) {
      files_.push_back(in);
      continue;
    }
    std::vector<std::string> found;
    for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {  // hidden: .git and the like
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_symlink() || !it->is_regular_file() || excluded(name, options_.exclude)) continue;
      found.push_back(it->path().string());
    }
    AXONN_CHECK_IO(!ec, "cannot read directory '", in, "': ", ec.message());
    AXONN_CHECK_IO(!found.empty(), "input directory '", in, "' has no files to read",
                   options_.exclude.empty() ? "" : " (after --exclude)");
    std::sort(found.begin(), found.end());
    files_.insert(files_.end(), found.begin(), found.end());
  }
  for (const auto& f : files_) {
    std::error_code ec;
    const auto size = fs::file_size(f, ec);
    AXONN_CHECK_IO(!ec, "cannot read input '", f, "': ", ec.message());
    sizes_.push_back(size);
    total_bytes_ += size;
  }
}

DocumentReader::~DocumentReader() {
  close();
  std::free(line_buf_);
}

std::optional<uint64_t> DocumentReader::max_documents() const {
  if (!options_.separator.empty()) return std::nullopt;
  uint64_t n = 0;
  for (size_t i = 0; i < files_.size(); i++) {
    if (is_jsonl(files_[i])) return std::nullopt;
    n += sizes_[i] > 0;
  }
  return n;
}

void DocumentReader::open(size_t i) {
  f_ = std::fopen(files_[i].c_str(), "rb");
  AXONN_CHECK_IO(f_, "cannot open input '", files_[i], "': ", std::strerror(errno));
  jsonl_ = is_jsonl(files_[i]);
  file_pos_ = 0;
  line_no_ = 0;
}

void DocumentReader::close() {
  if (f_) std::fclose(f_);
  f_ = nullptr;
}

bool DocumentReader::read_line(std::string& line) {
  errno = 0;
  const ssize_t n = ::getline(&line_buf_, &line_cap_, f_);
  if (n < 0) {
    AXONN_CHECK_IO(!std::ferror(f_), "cannot read input '", files_[current_ - 1], "': ", std::strerror(errno));
    line.clear();
    return false;
  }
  line.assign(line_buf_, static_cast<size_t>(n));
  file_pos_ += static_cast<uint64_t>(n);
  line_no_++;
  if (line.back() == '\n') line.pop_back();
  return true;
}

void DocumentReader::check_utf8(std::string& text, uint64_t offset, uint64_t line) const {
  const auto bad = find_invalid_utf8(text);
  if (!bad) return;
  if (options_.invalid_utf8 == InvalidUtf8::kReplace) {
    text = replace_invalid_utf8(text);
    return;
  }
  // a compressed file is not text in another encoding: say what it is (gzip's magic bytes 1f 8b)
  if (offset == 0 && text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b)
    throw IoError("input '" + files_[current_ - 1] + "' is gzip-compressed, not text: decompress it first (gunzip -k " +
                  files_[current_ - 1] + ", or zcat it into a file)");
  throw IoError("input '" + files_[current_ - 1] + "' is not UTF-8: " + where_invalid_utf8(text, *bad, offset, line) +
                ". Convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8), or pass --invalid-utf8 replace to "
                "replace what is not UTF-8 by U+FFFD");
}

bool DocumentReader::next_in_file(Document& doc) {
  doc.file = current_ - 1;
  std::string line;
  if (jsonl_) {
    while (true) {
      const uint64_t start = file_pos_;
      if (!read_line(line)) return false;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      check_utf8(line, start, line_no_);
      const std::string where = "input '" + files_[doc.file] + "' line " + std::to_string(line_no_);
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        throw IoError(where + " is not valid JSON: " + e.what());
      }
      AXONN_CHECK_IO(j.is_object() && j.contains("text") && j["text"].is_string(), where,
                     " is not a JSON object with a string \"text\" (JSON Lines input: one {\"text\": ...} per line)");
      doc.text = j["text"].get<std::string>();
      doc.line = line_no_;
      if (!doc.text.empty()) return true;
    }
  }
  if (options_.separator.empty()) {  // the whole file
    doc.text.clear();
    doc.line = 1;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f_)) > 0) doc.text.append(buf, n);
    AXONN_CHECK_IO(!std::ferror(f_), "cannot read input '", files_[doc.file], "': ", std::strerror(errno));
    const bool any = !doc.text.empty() && file_pos_ == 0;
    file_pos_ += doc.text.size();
    if (any) check_utf8(doc.text, 0, 1);
    return any;
  }
  while (true) {  // the lines up to the next separator line
    doc.text.clear();
    const uint64_t start = file_pos_;
    doc.line = line_no_ + 1;
    bool more = false;
    while ((more = read_line(line))) {
      std::string_view l(line);
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      if (l == options_.separator) break;
      doc.text += line;
      doc.text += '\n';
    }
    // the last line of a file without a final newline gained one: give it back
    if (!more && !doc.text.empty() && start + doc.text.size() > file_pos_) doc.text.pop_back();
    if (!doc.text.empty()) {
      check_utf8(doc.text, start, doc.line);
      return true;
    }
    if (!more) return false;
  }
}

bool DocumentReader::next(Document& doc) {
  while (true) {
    if (f_ && next_in_file(doc)) return true;
    if (f_) {
      close();
      done_bytes_ += sizes_[current_ - 1];
      file_pos_ = 0;
    }
    if (current_ >= files_.size()) return false;
    open(current_++);
  }
}

}  // namespace axonn::text
