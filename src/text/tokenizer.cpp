#include "axonn/text/tokenizer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "axonn/core/error.hpp"
#include "axonn/text/bpe.hpp"
#include "axonn/text/llmc_tokenizer.hpp"
#include "axonn/text/sentencepiece.hpp"

namespace axonn::text {

namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::optional<int32_t> first_int(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  int32_t v;
  const bool ok = std::fread(&v, sizeof v, 1, f) == 1;
  std::fclose(f);
  return ok ? std::optional<int32_t>(v) : std::nullopt;
}

// GPT-2's pair of files in a directory, in either spelling.
std::optional<std::pair<fs::path, fs::path>> gpt2_pair(const fs::path& dir) {
  for (auto [vocab, merges] : {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}})
    if (is_file(dir / vocab) && is_file(dir / merges)) return std::pair{dir / vocab, dir / merges};
  return std::nullopt;
}

// The files of a directory's tokenizer in load_dir's order of preference, or an empty list.
std::vector<std::pair<std::string, std::string>> dir_files(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  if (is_file(dir / "tokenizer.json")) {
    out.emplace_back((dir / "tokenizer.json").string(), "tokenizer.json");
    if (is_file(dir / "tokenizer_config.json"))
      out.emplace_back((dir / "tokenizer_config.json").string(), "tokenizer_config.json");
  } else if (auto p = gpt2_pair(dir)) {
    out.emplace_back(p->first.string(), p->first.filename().string());
    out.emplace_back(p->second.string(), p->second.filename().string());
  } else if (is_file(dir / "tokenizer.model")) {
    out.emplace_back((dir / "tokenizer.model").string(), "tokenizer.model");
  }
  return out;
}

std::unique_ptr<Tokenizer> load_dir(const fs::path& dir) {
  if (is_file(dir / "tokenizer.json")) return load_hf_tokenizer_json((dir / "tokenizer.json").string());
  if (auto p = gpt2_pair(dir)) return load_gpt2_bpe(p->first.string(), p->second.string());
  if (is_file(dir / "tokenizer.model")) return std::make_unique<SentencePieceTokenizer>((dir / "tokenizer.model").string());
  throw IoError("tokenizer directory '" + dir.string() +
                "' has none of tokenizer.json, vocab.json + merges.txt, encoder.json + vocab.bpe, tokenizer.model");
}

}  // namespace

std::vector<std::string> gpt2_search_path() {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("AXONN_GPT2_TOKENIZER_DIR"); d && *d) dirs.emplace_back(d);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dirs.push_back((fs::path(x) / "axonn/gpt2").string());
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dirs.push_back((fs::path(h) / ".cache/axonn/gpt2").string());
  }
  dirs.emplace_back("/usr/local/share/axonn/gpt2");
  dirs.emplace_back("/usr/share/axonn/gpt2");
  return dirs;
}

std::optional<std::string> find_gpt2_files() {
  for (const auto& d : gpt2_search_path())
    if (is_file(fs::path(d) / "encoder.json") && is_file(fs::path(d) / "vocab.bpe")) return d;
  return std::nullopt;
}

std::vector<std::string_view> split_for_encoding(const Tokenizer& tok, std::string_view text, size_t max_bytes) {
  AXONN_CHECK(max_bytes >= 8, "split_for_encoding: max_bytes ", max_bytes, " is too small to hold a character");
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  std::vector<std::string_view> pieces;
  while (text.size() > max_bytes) {
    size_t cut = 0, skip = 0;
    for (size_t i = std::min(max_bytes, text.size() - 2); i > max_bytes / 2 && !cut; i--)
      if (text[i] == ' ' && !blank(text[i - 1]) && !blank(text[i + 1])) cut = i;
    if (cut) {
      skip = tok.implies_leading_space() ? 1 : 0;  // encode() puts its own "▁" where the space was
    } else {  // no word boundary: the last character boundary (a byte that is not 10xxxxxx)
      cut = max_bytes;
      while (cut > max_bytes - 3 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) cut--;
    }
    pieces.push_back(text.substr(0, cut));
    text.remove_prefix(cut + skip);
  }
  pieces.push_back(text);
  return pieces;
}

std::vector<int> parse_ids(const std::string& s) {
  std::vector<int> ids;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    AXONN_CHECK_ARG(used > 0 && item.find_first_not_of(" ", used) == std::string::npos, "'", item,
                    "' is not a token id; give ids as 1,2,3");
    ids.push_back(v);
  }
  return ids;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  AXONN_CHECK_ARG(!spec.empty(), "no tokenizer given: use gpt2 or a path (tokenizer.json, vocab.json, "
                                 "tokenizer.model, gpt2_tokenizer.bin, or a directory holding one)");
  if (spec == "gpt2") {
    auto dir = find_gpt2_files();
    if (!dir) {
      std::string where;
      for (const auto& d : gpt2_search_path()) where += "\n  " + d;
      throw IoError("GPT-2's tokenizer files (encoder.json, vocab.bpe) are not installed; looked in:" + where +
                    "\nfetch them with scripts/fetch-gpt2-tokenizer.sh (scripts/install-deps.sh runs it)");
    }
    return load_gpt2_bpe((fs::path(*dir) / "encoder.json").string(), (fs::path(*dir) / "vocab.bpe").string());
  }
  const fs::path p(spec);
  std::error_code ec;
  if (fs::is_directory(p, ec)) return load_dir(p);
  AXONN_CHECK_IO(fs::exists(p, ec), "cannot open tokenizer '", spec,
                 "': no such file or directory (give gpt2, or a tokenizer file or directory)");
  const std::string ext = p.extension().string(), name = p.filename().string();
  const std::optional<int32_t> magic = first_int(spec);
  if (magic == kLlmcTokenizerMagic) return std::make_unique<LlmcTokenizer>(spec);
  constexpr int32_t kGgufMagic = 0x46554747;  // "GGUF", little-endian
  AXONN_CHECK_ARG(magic != kGgufMagic, "'", spec, "' is a GGUF model file; the tokenizer inside one is ",
                  "read with its model (--init ", spec, "). To use it elsewhere, write it out as files: axonn convert ",
                  "--from ", spec, " --to DIR/ (a Hugging Face directory with the tokenizer's files), then give DIR");
  if (ext == ".model") return std::make_unique<SentencePieceTokenizer>(spec);
  if (name == "vocab.json" || name == "encoder.json" || ext == ".bpe" || ext == ".txt") {
    auto pair = gpt2_pair(p.parent_path().empty() ? fs::path(".") : p.parent_path());
    AXONN_CHECK_IO(pair.has_value(), "'", spec, "' is one of GPT-2's two files; its partner (merges.txt beside ",
                   "vocab.json, or vocab.bpe beside encoder.json) is not in the same directory");
    return load_gpt2_bpe(pair->first.string(), pair->second.string());
  }
  if (ext == ".json") return load_hf_tokenizer_json(spec);
  throw IoError("cannot tell what kind of tokenizer '" + spec +
                "' is: expected tokenizer.json, vocab.json / encoder.json (with merges.txt / vocab.bpe), a "
                "SentencePiece .model, or llm.c's gpt2_tokenizer.bin (magic 20240328)");
}

std::vector<std::pair<std::string, std::string>> tokenizer_files_in(const std::string& dir) {
  return dir_files(fs::path(dir));
}

std::vector<std::pair<std::string, std::string>> tokenizer_files(const std::string& spec) {
  const auto tok = load_tokenizer(spec);  // every check load_tokenizer makes, and its messages
  if (!tok->can_encode()) return {};
  if (spec == "gpt2") return dir_files(fs::path(*find_gpt2_files()));
  const fs::path p(spec);
  std::error_code ec;
  if (fs::is_directory(p, ec)) return dir_files(p);
  const std::string ext = p.extension().string(), name = p.filename().string();
  if (ext == ".model") return {{spec, "tokenizer.model"}};
  if (name == "vocab.json" || name == "encoder.json" || ext == ".bpe" || ext == ".txt")
    return dir_files(p.parent_path().empty() ? fs::path(".") : p.parent_path());
  std::vector<std::pair<std::string, std::string>> out = {{spec, "tokenizer.json"}};  // a tokenizer.json
  const fs::path config = (p.parent_path().empty() ? fs::path(".") : p.parent_path()) / "tokenizer_config.json";
  if (is_file(config)) out.emplace_back(config.string(), "tokenizer_config.json");
  return out;
}

std::string StreamDecoder::push(int id) {
  if (tok_.decodes_by_concatenation()) {
    const int one[1] = {id};
    return bytes_.push(tok_.decode(one));
  }
  // Decode everything again and return what is new, holding back a trailing U+FFFD: it may be an
  // unfinished byte-fallback character that the next id completes.
  ids_.push_back(id);
  const std::string all = tok_.decode(ids_);
  size_t end = all.size();
  while (end >= emitted_ + 3 && all.compare(end - 3, 3, "\xEF\xBF\xBD") == 0) end -= 3;
  if (end <= emitted_) return {};
  std::string out = all.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

std::string StreamDecoder::finish() {
  if (tok_.decodes_by_concatenation()) return bytes_.finish();
  const std::string all = tok_.decode(ids_);
  std::string out = all.size() > emitted_ ? all.substr(emitted_) : std::string();
  emitted_ = all.size();
  return out;
}

}  // namespace axonn::text
