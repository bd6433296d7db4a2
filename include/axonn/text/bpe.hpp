// text/bpe.hpp — byte-level BPE (GPT-2, Llama 3), written from the algorithm (spec
// models-text-goldfish.md §3.3).
//
// Encoding: special tokens are split out first (encode; encode_ordinary skips this), the text is
// cut into pieces by the pre-tokenizer regex(es) (pretokenizer.hpp), and each piece's bytes are
// merged: start from one symbol per byte, repeatedly take the adjacent pair whose merge has the
// lowest rank (its line in merges.txt) and merge all its occurrences left to right, until no pair
// has a rank. Llama 3's tokenizer.json sets `ignore_merges`: a piece that is itself in the
// vocabulary is emitted whole. Results are cached per thread and piece.
//
// The files spell each token's bytes with GPT-2's byte-to-character map (bytes_to_unicode: the
// printable bytes stand for themselves, the other 68 for U+0100.. in byte order); this class keeps
// raw bytes, so decoding concatenates them and any byte sequence, valid UTF-8 or not, round-trips.
//
//   auto tok = text::load_gpt2_bpe("encoder.json", "vocab.bpe");   // or vocab.json, merges.txt
//   auto llama3 = text::load_hf_tokenizer_json("tokenizer.json");
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "axonn/text/pretokenizer.hpp"
#include "axonn/text/tokenizer.hpp"

namespace axonn::text {

// GPT-2's byte-to-character map: the UTF-8 of the character that stands for byte b in the files, a
// token's bytes so spelled, and back (nullopt for a character that stands for no byte).
std::string byte_to_symbol(unsigned char b);
std::string bytes_to_symbols(std::string_view bytes);
std::optional<std::string> symbols_to_bytes(std::string_view symbols);

// What a byte-level BPE model is made of, in raw bytes (not the files' characters).
struct BpeSpec {
  std::string describe;                                  // for messages
  std::vector<std::pair<std::string, int>> vocab;        // token bytes, id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<std::string> patterns;                     // pre-tokenizer regexes, applied in turn
  std::vector<std::pair<std::string, int>> specials;     // text split out before anything else, id
  bool add_prefix_space = false;  // a space before text that does not start with one (HF ByteLevel)
  bool ignore_merges = false;     // a piece found in the vocabulary is emitted whole (Llama 3)
  int eot = -1, bos = -1, eos = -1;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Checks the model: every byte has a token, every merge joins two tokens into a token. Throws
  // IoError saying what is missing (`spec.describe` names the files).
  explicit BpeTokenizer(BpeSpec spec);

  std::string describe() const override { return describe_; }
  int vocab_size() const override { return static_cast<int>(bytes_of_.size()); }
  std::vector<int> encode(std::string_view text) const override;
  std::vector<int> encode_ordinary(std::string_view text) const override;
  std::string decode(std::span<const int> ids) const override;

  // The bytes of one token (empty for an id no token has).
  const std::string& token_bytes(int id) const { return bytes_of_.at(static_cast<size_t>(id)); }
  std::optional<TokenizerListing> listing() const override;

 private:
  struct Merge {
    int rank = -1;  // -1: no merge
    int id = -1;    // the merged token
  };
  // The merges by pair (left id << 32 | right id): open addressing with linear probing, a flat table
  // at most half full (the lookup is the inner loop of BPE).
  class MergeTable {
   public:
    void build(const std::vector<std::pair<uint64_t, Merge>>& merges);
    Merge find(uint64_t pair) const {
      for (size_t i = slot(pair);; i = (i + 1) & mask_) {
        if (keys_[i] == pair) return values_[i];
        if (keys_[i] == kEmpty) return {};
      }
    }

   private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};  // no pair of two ids below 2^31 is this
    size_t slot(uint64_t pair) const { return static_cast<size_t>((pair * 0x9E3779B97F4A7C15ull) >> shift_); }
    std::vector<uint64_t> keys_;
    std::vector<Merge> values_;
    size_t mask_ = 0;
    int shift_ = 64;
  };
  void encode_ordinary_into(std::string_view text, std::vector<int>& out) const;
  void bpe_into(std::string_view piece, std::vector<int>& out) const;

  std::string describe_;
  std::vector<std::string> bytes_of_;             // by id
  std::unordered_map<std::string, int> id_of_;    // by bytes
  MergeTable merges_;
  std::vector<std::pair<std::string, std::string>> merge_list_;  // in rank order, raw bytes (for listing())
  std::vector<std::string> patterns_;
  std::array<int, 256> byte_id_{};
  std::vector<RegexSplitter> splitters_;
  std::vector<std::pair<std::string, int>> specials_;  // longest first
  std::array<bool, 256> special_first_byte_{};
  bool add_prefix_space_ = false, ignore_merges_ = false;
  uint64_t serial_;  // tells this tokenizer's entries in the per-thread cache from another's
};

// GPT-2's files: vocab.json (or encoder.json), an object from token (in the files' characters) to
// id, and merges.txt (or vocab.bpe): a "#version" line, then one merge "a b" per line in rank order.
// <|endoftext|> is split out as a special token and is the end-of-text id.
std::unique_ptr<BpeTokenizer> load_gpt2_bpe(const std::string& vocab_json, const std::string& merges_txt);

// A Hugging Face tokenizer.json whose model is byte-level BPE: pre_tokenizer ByteLevel, or a
// Sequence of Split (regex, behaviour Isolated) and ByteLevel; no normalizer; added_tokens are split
// out. BOS/EOS come from a tokenizer_config.json beside it, else the post-processor's template and
// the usual names. Anything else is refused with an IoError saying what is not supported.
std::unique_ptr<BpeTokenizer> load_hf_tokenizer_json(const std::string& path);

}  // namespace axonn::text
