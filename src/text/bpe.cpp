#include "axonn/text/bpe.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "axonn/core/error.hpp"
#include "axonn/text/utf8.hpp"
#include "files.hpp"

namespace axonn::text {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// GPT-2's bytes_to_unicode: bytes 33..126, 161..172 and 174..255 stand for themselves; the other 68
// stand for 256, 257, ... in increasing byte order.
struct ByteMap {
  std::array<char32_t, 256> symbol{};
  std::array<int, 324> byte_of{};  // by code point (all symbols are below 256 + 68); -1: none
  ByteMap() {
    byte_of.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; b++) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      symbol[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
      byte_of[symbol[static_cast<size_t>(b)]] = b;
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes one valid UTF-8 character at s[i] (the caller checked validity).
char32_t code_point(std::string_view s, size_t i, size_t n) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (n == 1) return b0;
  char32_t cp = b0 & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; k++) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

uint64_t pair_key(int a, int b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

// What one thread remembers of pieces it has encoded, for one tokenizer at a time.
struct PieceCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int>> ids;
};
constexpr size_t kCacheEntries = 1 << 18;  // then it starts over: bounded memory per thread
std::atomic<uint64_t> next_serial{1};

// Token bytes from a file's spelling, or IoError naming the file and the token.
std::string file_token_bytes(const std::string& symbols, const std::string& where) {
  auto bytes = symbols_to_bytes(symbols);
  AXONN_CHECK_IO(bytes.has_value(), where, ": token '", symbols,
                 "' has a character that stands for no byte in GPT-2's byte-level alphabet; is it a byte-level "
                 "BPE vocabulary?");
  return *bytes;
}

json parse_json(const std::string& path, const std::string& what) {
  const std::string text = detail::read_file(path, what);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw IoError(what + " '" + path + "' is not valid JSON: " + e.what());
  }
}

// vocab.json: {"token": id, ...}
void read_vocab_object(const json& v, const std::string& where, BpeSpec& spec) {
  AXONN_CHECK_IO(v.is_object() && !v.empty(), where, ": the vocabulary must be a JSON object from token to id");
  spec.vocab.reserve(v.size());
  for (const auto& [token, id] : v.items()) {
    AXONN_CHECK_IO(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < INT_MAX, where,
                   ": token '", token, "' has id ", id.dump(), ", not a non-negative integer");
    spec.vocab.emplace_back(file_token_bytes(token, where), id.get<int>());
  }
}

void add_merge(const std::string& left, const std::string& right, const std::string& where, BpeSpec& spec) {
  spec.merges.emplace_back(file_token_bytes(left, where), file_token_bytes(right, where));
}

int find_id(const BpeSpec& spec, std::string_view bytes) {
  for (const auto& [b, id] : spec.specials)
    if (b == bytes) return id;
  for (const auto& [b, id] : spec.vocab)
    if (b == bytes) return id;
  return -1;
}

}  // namespace

std::string byte_to_symbol(unsigned char b) {
  std::string s;
  append_utf8(s, byte_map().symbol[b]);
  return s;
}

std::string bytes_to_symbols(std::string_view bytes) {
  std::string s;
  for (unsigned char b : bytes) s += byte_to_symbol(b);
  return s;
}

std::optional<std::string> symbols_to_bytes(std::string_view symbols) {
  std::string out;
  out.reserve(symbols.size());
  for (size_t i = 0; i < symbols.size();) {
    const Utf8Step st = utf8_step(symbols, i);
    if (!st.valid) return std::nullopt;
    const char32_t cp = code_point(symbols, i, st.length);
    if (cp >= byte_map().byte_of.size() || byte_map().byte_of[cp] < 0) return std::nullopt;
    out += static_cast<char>(byte_map().byte_of[cp]);
    i += st.length;
  }
  return out;
}

BpeTokenizer::BpeTokenizer(BpeSpec spec)
    : describe_(std::move(spec.describe)),
      add_prefix_space_(spec.add_prefix_space),
      ignore_merges_(spec.ignore_merges),
      serial_(next_serial.fetch_add(1)) {
  eot_ = spec.eot;
  bos_ = spec.bos;
  eos_ = spec.eos;
  // Special tokens get an id's bytes (for decoding) but no entry in id_of_: BPE never produces them.
  auto place = [&](const std::string& bytes, int id) {
    if (static_cast<size_t>(id) >= bytes_of_.size()) bytes_of_.resize(static_cast<size_t>(id) + 1);
    std::string& slot = bytes_of_[static_cast<size_t>(id)];
    AXONN_CHECK_IO(slot.empty() || slot == bytes, describe_, ": id ", id, " is given to two different tokens");
    slot = bytes;
  };
  AXONN_CHECK_IO(!spec.vocab.empty(), describe_, ": the vocabulary is empty");
  // bytes_of_ is indexed by id, so an id far beyond the number of tokens would size it by that id (a 9 GB
  // table for one stray id): allow gaps, but not more of them than kMaxIdGaps
  constexpr int64_t kMaxIdGaps = int64_t{1} << 20;
  int64_t max_id = -1;
  for (const auto& [bytes, id] : spec.vocab) max_id = std::max<int64_t>(max_id, id);
  for (const auto& [text, id] : spec.specials) max_id = std::max<int64_t>(max_id, id);
  const auto tokens = static_cast<int64_t>(spec.vocab.size() + spec.specials.size());
  AXONN_CHECK_IO(max_id < tokens + kMaxIdGaps, describe_, ": the largest id, ", max_id, ", leaves ",
                 max_id + 1 - tokens, " ids without a token (at most ", kMaxIdGaps,
                 " may be): is an id mistyped?");
  for (const auto& [bytes, id] : spec.vocab) {
    AXONN_CHECK_IO(!bytes.empty(), describe_, ": id ", id, " is an empty token");
    place(bytes, id);
    auto [it, fresh] = id_of_.emplace(bytes, id);
    AXONN_CHECK_IO(fresh || it->second == id, describe_, ": token '", bytes, "' has two ids, ", it->second, " and ", id);
  }
  for (int b = 0; b < 256; b++) {
    auto it = id_of_.find(std::string(1, static_cast<char>(b)));
    AXONN_CHECK_IO(it != id_of_.end(), describe_, ": no token for byte 0x", std::hex, b,
                   "; a byte-level BPE vocabulary has one for each of the 256 bytes");
    byte_id_[static_cast<size_t>(b)] = it->second;
  }
  std::vector<std::pair<uint64_t, Merge>> merges;
  merges.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); rank++) {
    const auto& [left, right] = spec.merges[rank];
    auto l = id_of_.find(left), r = id_of_.find(right), m = id_of_.find(left + right);
    AXONN_CHECK_IO(l != id_of_.end() && r != id_of_.end() && m != id_of_.end(), describe_, ": merge ", rank + 1,
                   " ('", left, "' + '", right, "') ", m == id_of_.end() ? "makes a token" : "uses a token",
                   " that is not in the vocabulary");
    merges.emplace_back(pair_key(l->second, r->second), Merge{static_cast<int>(rank), m->second});
  }
  merges_.build(merges);
  merge_list_ = std::move(spec.merges);
  patterns_ = spec.patterns;
  for (const auto& [text, id] : spec.specials) {
    AXONN_CHECK_IO(!text.empty() && id >= 0, describe_, ": special token '", text, "' is empty or has no id");
    place(text, id);
    specials_.emplace_back(text, id);
    special_first_byte_[static_cast<unsigned char>(text[0])] = true;
  }
  std::stable_sort(specials_.begin(), specials_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& p : spec.patterns) splitters_.emplace_back(p);
  for (int id : {eot_, bos_, eos_})
    AXONN_CHECK_IO(id < vocab_size(), describe_, ": special id ", id, " is outside the vocabulary");
}

void BpeTokenizer::MergeTable::build(const std::vector<std::pair<uint64_t, Merge>>& merges) {
  size_t size = 16;
  shift_ = 60;
  while (size < 2 * merges.size()) {
    size *= 2;
    shift_--;
  }
  keys_.assign(size, kEmpty);
  values_.assign(size, Merge{});
  mask_ = size - 1;
  for (const auto& [pair, merge] : merges) {
    size_t i = slot(pair);
    while (keys_[i] != kEmpty && keys_[i] != pair) i = (i + 1) & mask_;
    if (keys_[i] == pair) continue;  // a repeated merge keeps its first (lowest) rank
    keys_[i] = pair;
    values_[i] = merge;
  }
}

void BpeTokenizer::bpe_into(std::string_view piece, std::vector<int>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    if (auto it = id_of_.find(std::string(piece)); it != id_of_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local PieceCache cache;
  if (cache.owner != serial_ || cache.ids.size() >= kCacheEntries) {
    cache.ids.clear();
    cache.owner = serial_;
  }
  std::string key(piece);
  if (auto it = cache.ids.find(key); it != cache.ids.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  std::vector<int> word(piece.size());
  for (size_t i = 0; i < piece.size(); i++) word[i] = byte_id_[static_cast<unsigned char>(piece[i])];
  std::vector<int> merged;
  merged.reserve(word.size());
  while (word.size() > 1) {
    // the adjacent pair whose merge ranks lowest
    int best_rank = INT_MAX, left = -1, right = -1, into = -1;
    for (size_t i = 0; i + 1 < word.size(); i++) {
      const Merge m = merges_.find(pair_key(word[i], word[i + 1]));
      if (m.rank >= 0 && m.rank < best_rank) {
        best_rank = m.rank;
        left = word[i];
        right = word[i + 1];
        into = m.id;
      }
    }
    if (into < 0) break;
    // merge every occurrence, left to right
    merged.clear();
    for (size_t i = 0; i < word.size();) {
      if (word[i] == left && i + 1 < word.size() && word[i + 1] == right) {
        merged.push_back(into);
        i += 2;
      } else {
        merged.push_back(word[i]);
        i += 1;
      }
    }
    word.swap(merged);
  }
  out.insert(out.end(), word.begin(), word.end());
  cache.ids.emplace(std::move(key), std::move(word));
}

void BpeTokenizer::encode_ordinary_into(std::string_view text, std::vector<int>& out) const {
  if (text.empty()) return;
  std::string prefixed;
  if (add_prefix_space_ && text[0] != ' ') {
    prefixed.reserve(text.size() + 1);
    prefixed += ' ';
    prefixed.append(text);
    text = prefixed;
  }
  std::vector<std::string_view> pieces{text}, next;
  for (const auto& s : splitters_) {
    next.clear();
    for (std::string_view p : pieces) s.split(p, next);
    pieces.swap(next);
  }
  for (std::string_view p : pieces) bpe_into(p, out);
}

std::vector<int> BpeTokenizer::encode_ordinary(std::string_view text) const {
  std::vector<int> out;
  out.reserve(text.size() / 3 + 1);
  encode_ordinary_into(text, out);
  return out;
}

std::vector<int> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int> out;
  out.reserve(text.size() / 3 + 1);
  size_t start = 0;  // text not yet encoded
  for (size_t i = 0; i < text.size(); i++) {
    if (!special_first_byte_[static_cast<unsigned char>(text[i])]) continue;
    for (const auto& [s, id] : specials_) {  // longest first
      if (text.compare(i, s.size(), s) == 0) {
        encode_ordinary_into(text.substr(start, i - start), out);
        out.push_back(id);
        start = i + s.size();
        i = start - 1;
        break;
      }
    }
  }
  encode_ordinary_into(text.substr(start), out);
  return out;
}

std::string BpeTokenizer::decode(std::span<const int> ids) const {
  std::string out;
  for (int id : ids) {
    AXONN_CHECK_ARG(id >= 0 && id < vocab_size() && !bytes_of_[static_cast<size_t>(id)].empty(), "token id ", id,
                    " is not in the vocabulary of ", describe_, " (", vocab_size(), " ids)");
    out += bytes_of_[static_cast<size_t>(id)];
  }
  return out;
}

std::optional<TokenizerListing> BpeTokenizer::listing() const {
  TokenizerListing l;
  l.kind = TokenizerListing::Kind::kByteBpe;
  l.tokens.resize(bytes_of_.size());
  l.types.assign(bytes_of_.size(), TokenizerListing::kNormal);
  for (size_t id = 0; id < bytes_of_.size(); id++) {
    if (bytes_of_[id].empty()) l.types[id] = TokenizerListing::kUnused;
    else l.tokens[id] = bytes_to_symbols(bytes_of_[id]);
  }
  for (const auto& [text, id] : specials_) {  // their text as it is, as tokenizer files keep it
    l.tokens[static_cast<size_t>(id)] = text;
    l.types[static_cast<size_t>(id)] = TokenizerListing::kControl;
  }
  l.merges.reserve(merge_list_.size());
  for (const auto& [left, right] : merge_list_) l.merges.push_back(bytes_to_symbols(left) + " " + bytes_to_symbols(right));
  l.patterns = patterns_;
  l.add_prefix_space = add_prefix_space_;
  l.ignore_merges = ignore_merges_;
  l.bos = bos_;
  l.eos = eos_;
  l.eot = eot_;
  return l;
}

std::unique_ptr<BpeTokenizer> load_gpt2_bpe(const std::string& vocab_json, const std::string& merges_txt) {
  BpeSpec spec;
  spec.describe = "GPT-2 BPE (" + vocab_json + ", " + merges_txt + ")";
  read_vocab_object(parse_json(vocab_json, "GPT-2 vocabulary"), "GPT-2 vocabulary '" + vocab_json + "'", spec);
  const std::string merges = detail::read_file(merges_txt, "GPT-2 merges file");
  const std::string where = "GPT-2 merges file '" + merges_txt + "'";
  size_t line_no = 0;
  for (size_t pos = 0; pos < merges.size();) {
    size_t eol = merges.find('\n', pos);
    if (eol == std::string::npos) eol = merges.size();
    std::string line = merges.substr(pos, eol - pos);
    pos = eol + 1;
    line_no++;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    AXONN_CHECK_IO(sp != std::string::npos && sp > 0 && sp + 1 < line.size() &&
                       line.find(' ', sp + 1) == std::string::npos,
                   where, " line ", line_no, " is '", line, "', not a merge 'A B'");
    add_merge(line.substr(0, sp), line.substr(sp + 1), where + " line " + std::to_string(line_no), spec);
  }
  AXONN_CHECK_IO(!spec.merges.empty(), where, " has no merges");
  spec.patterns.emplace_back(kGpt2Pattern);
  if (int eot = find_id(spec, "<|endoftext|>"); eot >= 0) {
    spec.specials.emplace_back("<|endoftext|>", eot);
    spec.eot = spec.eos = eot;
  }
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

namespace {

// tokenizer_config.json's bos_token / eos_token: a string or {"content": "..."}.
std::string config_token(const json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return {};
  const json& t = config[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
  return {};
}

// The special token a TemplateProcessing post-processor puts first ("<|begin_of_text|>"), if any.
std::string template_bos(const json& pp) {
  if (!pp.is_object()) return {};
  if (pp.value("type", "") == "Sequence" && pp.contains("processors")) {
    for (const auto& p : pp["processors"])
      if (auto s = template_bos(p); !s.empty()) return s;
    return {};
  }
  if (pp.value("type", "") != "TemplateProcessing" || !pp.contains("single") || !pp["single"].is_array() ||
      pp["single"].empty())
    return {};
  const json& first = pp["single"][0];
  if (first.contains("SpecialToken") && first["SpecialToken"].contains("id"))
    return first["SpecialToken"]["id"].get<std::string>();
  return {};
}

// Reads a pre_tokenizer into spec.patterns; false if it has no ByteLevel step (not byte-level BPE).
bool read_pre_tokenizer(const json& pt, const std::string& where, BpeSpec& spec) {
  AXONN_CHECK_IO(pt.is_object(), where, ": no pre_tokenizer; only byte-level BPE models are read from tokenizer.json");
  const std::string type = pt.value("type", "");
  if (type == "Sequence") {
    bool byte_level = false;
    for (const auto& p : pt.at("pretokenizers")) byte_level = read_pre_tokenizer(p, where, spec) || byte_level;
    return byte_level;
  }
  if (type == "ByteLevel") {
    if (pt.value("use_regex", true)) spec.patterns.emplace_back(kGpt2Pattern);
    spec.add_prefix_space = pt.value("add_prefix_space", false);
    return true;
  }
  if (type == "Split") {
    AXONN_CHECK_IO(pt.value("behavior", "") == "Isolated" && !pt.value("invert", false), where,
                   ": pre-tokenizer Split with behavior '", pt.value("behavior", ""), "'",
                   pt.value("invert", false) ? " inverted" : "", " is not supported (only Isolated)");
    const json& pat = pt.at("pattern");
    if (pat.contains("Regex")) {
      spec.patterns.push_back(pat["Regex"].get<std::string>());
    } else {
      spec.patterns.push_back("\\Q" + pat.at("String").get<std::string>() + "\\E");
    }
    return false;
  }
  throw IoError(where + ": pre-tokenizer '" + type + "' is not supported (ByteLevel, Split and Sequence are)");
}

}  // namespace

std::unique_ptr<BpeTokenizer> load_hf_tokenizer_json(const std::string& path) {
  const json t = parse_json(path, "tokenizer file");
  const std::string where = "tokenizer file '" + path + "'";
  BpeSpec spec;
  spec.describe = "Hugging Face byte-level BPE (" + path + ")";
  try {
    AXONN_CHECK_IO(t.is_object() && t.contains("model") && t["model"].is_object(), where,
                   " has no \"model\": is it a Hugging Face tokenizer.json?");
    const json& m = t["model"];
    const std::string type = m.value("type", "BPE");
    AXONN_CHECK_IO(type == "BPE", where, " holds a ", type, " model; only byte-level BPE is read from tokenizer.json",
                   " (for SentencePiece models give tokenizer.model)");
    AXONN_CHECK_IO(!t.contains("normalizer") || t["normalizer"].is_null(), where, " has a normalizer (",
                   t["normalizer"].value("type", "?"),
                   "); byte-level BPE models have none. For Llama 2 / TinyLlama give tokenizer.model (SentencePiece)");
    for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
      AXONN_CHECK_IO(!m.contains(affix) || m[affix].is_null() || m[affix].get<std::string>().empty(), where,
                     ": BPE with a ", affix, " is not supported");
    AXONN_CHECK_IO(!m.contains("dropout") || m["dropout"].is_null() || m["dropout"].get<double>() == 0.0, where,
                   ": BPE dropout is not supported");
    AXONN_CHECK_IO(t.contains("pre_tokenizer") && read_pre_tokenizer(t["pre_tokenizer"], where, spec), where,
                   " is not a byte-level BPE model (its pre_tokenizer has no ByteLevel step). For Llama 2 / "
                   "TinyLlama give tokenizer.model (SentencePiece)");
    spec.ignore_merges = m.value("ignore_merges", false);
    read_vocab_object(m.at("vocab"), where, spec);
    const json& merges = m.at("merges");
    AXONN_CHECK_IO(merges.is_array(), where, ": model.merges must be a list");
    for (size_t i = 0; i < merges.size(); i++) {
      const json& mg = merges[i];
      const std::string at = where + " merge " + std::to_string(i + 1);
      if (mg.is_string()) {  // "a b"
        const std::string s = mg.get<std::string>();
        const size_t sp = s.find(' ');
        AXONN_CHECK_IO(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, at, " is '", s,
                       "', not 'A B'");
        add_merge(s.substr(0, sp), s.substr(sp + 1), at, spec);
      } else {  // ["a", "b"]
        AXONN_CHECK_IO(mg.is_array() && mg.size() == 2, at, " is neither 'A B' nor [A, B]");
        add_merge(mg[0].get<std::string>(), mg[1].get<std::string>(), at, spec);
      }
    }
    if (t.contains("added_tokens") && t["added_tokens"].is_array())
      for (const auto& a : t["added_tokens"]) spec.specials.emplace_back(a.at("content").get<std::string>(), a.at("id").get<int>());
    // BOS / EOS: tokenizer_config.json beside the file, else the post-processor and usual names
    json config;
    const fs::path cfg = fs::path(path).parent_path() / "tokenizer_config.json";
    std::error_code ec;
    if (fs::exists(cfg, ec)) config = parse_json(cfg.string(), "tokenizer config");
    std::string bos = config_token(config, "bos_token"), eos = config_token(config, "eos_token");
    if (bos.empty() && t.contains("post_processor")) bos = template_bos(t["post_processor"]);
    for (const char* name : {"<|endoftext|>", "<|end_of_text|>"})
      if (spec.eot < 0) spec.eot = find_id(spec, name);
    spec.bos = bos.empty() ? -1 : find_id(spec, bos);
    spec.eos = eos.empty() ? spec.eot : find_id(spec, eos);
    if (spec.eot < 0) spec.eot = spec.eos;
  } catch (const json::exception& e) {
    throw IoError(where + " is malformed: " + e.what());
  }
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

}  // namespace axonn::text
