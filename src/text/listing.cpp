// A tokenizer made from its listing (the vocabulary a GGUF file holds), and the listing as the file a
// Hugging Face directory holds (text/tokenizer.hpp).
#include <bit>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "axonn/core/error.hpp"
#include "axonn/text/bpe.hpp"
#include "axonn/text/sentencepiece.hpp"
#include "axonn/text/tokenizer.hpp"

namespace axonn::text {

namespace {

using Listing = TokenizerListing;

// The listing's pieces as a byte-level BPE model: tokens in GPT-2's byte characters, control and
// user-defined tokens as their text.
BpeSpec bpe_spec(const Listing& l, const std::string& describe) {
  BpeSpec spec;
  spec.describe = describe;
  for (size_t id = 0; id < l.tokens.size(); id++) {
    const std::string& token = l.tokens[id];
    const int type = id < l.types.size() ? l.types[id] : Listing::kNormal;
    if (token.empty() || type == Listing::kUnused) continue;
    if (type == Listing::kControl || type == Listing::kUserDefined) {
      spec.specials.emplace_back(token, static_cast<int>(id));
      continue;
    }
    const std::optional<std::string> bytes = symbols_to_bytes(token);
    AXONN_CHECK_IO(bytes.has_value(), describe, ": token ", id, " '", token, "' is not written in GPT-2's byte ",
                   "characters, as a byte-level BPE vocabulary is");
    spec.vocab.emplace_back(*bytes, static_cast<int>(id));
  }
  for (size_t rank = 0; rank < l.merges.size(); rank++) {
    const std::string& m = l.merges[rank];
    const size_t sp = m.find(' ');
    std::optional<std::string> left, right;
    if (sp != std::string::npos && m.find(' ', sp + 1) == std::string::npos) {
      left = symbols_to_bytes(m.substr(0, sp));
      right = symbols_to_bytes(m.substr(sp + 1));
    }
    AXONN_CHECK_IO(left && right && !left->empty() && !right->empty(), describe, ": merge ", rank + 1, " is '", m,
                   "', not two tokens in GPT-2's byte characters with a space between");
    spec.merges.emplace_back(*left, *right);
  }
  spec.patterns = l.patterns;
  spec.add_prefix_space = l.add_prefix_space;
  spec.ignore_merges = l.ignore_merges;
  spec.bos = l.bos;
  spec.eos = l.eos;
  spec.eot = l.eot >= 0 ? l.eot : l.eos;
  return spec;
}

// Protocol buffers' wire format, as much of it as SentencePiece's ModelProto needs
// (sentencepiece_model.proto; the field numbers were checked against a model `spm_train` wrote).
class Proto {
 public:
  void varint(uint64_t v) {
    for (; v >= 0x80; v >>= 7) out_ += static_cast<char>((v & 0x7F) | 0x80);
    out_ += static_cast<char>(v);
  }
  void integer(int field, int64_t v) {  // int32, enum and bool: a negative value as 10 bytes, as protobuf does
    varint(static_cast<uint64_t>(field) << 3);
    varint(static_cast<uint64_t>(v));
  }
  void real(int field, float v) {
    varint(static_cast<uint64_t>(field) << 3 | 5);
    const uint32_t bits = std::bit_cast<uint32_t>(v);
    for (int i = 0; i < 4; i++) out_ += static_cast<char>(bits >> (8 * i));
  }
  void bytes(int field, std::string_view s) {
    varint(static_cast<uint64_t>(field) << 3 | 2);
    varint(s.size());
    out_ += s;
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// The listing's pieces as a SentencePiece BPE model with identity normalisation and whitespace kept, as
// llama.cpp tokenizes a `llama` vocabulary.
std::string sentencepiece_model(const Listing& l, const std::string& describe) {
  Proto model;
  int unk = -1;
  bool byte_pieces = false;
  for (size_t id = 0; id < l.tokens.size(); id++) {
    const int type = id < l.types.size() ? l.types[id] : Listing::kNormal;
    AXONN_CHECK_IO(type >= Listing::kNormal && type <= Listing::kByte, describe, ": token ", id, " has type ", type,
                   "; SentencePiece's are 1 (normal) to 6 (byte)");
    AXONN_CHECK_IO(!l.tokens[id].empty(), describe, ": token ", id, " is empty");
    if (type == Listing::kUnknown && unk < 0) unk = static_cast<int>(id);
    byte_pieces = byte_pieces || type == Listing::kByte;
    Proto piece;  // ModelProto.SentencePiece: piece 1, score 2, type 3
    piece.bytes(1, l.tokens[id]);
    piece.real(2, id < l.scores.size() ? l.scores[id] : 0.0f);
    if (type != Listing::kNormal) piece.integer(3, type);
    model.bytes(1, piece.str());  // ModelProto.pieces
  }
  AXONN_CHECK_IO(unk >= 0, describe, " has no unknown token (type 2), which a SentencePiece model needs");
  const auto piece_of = [&](int id) -> std::string_view {
    return id >= 0 && id < static_cast<int>(l.tokens.size()) ? std::string_view(l.tokens[static_cast<size_t>(id)])
                                                              : std::string_view();
  };
  Proto trainer;  // TrainerSpec
  trainer.integer(3, 2);  // model_type: BPE
  trainer.integer(4, static_cast<int64_t>(l.tokens.size()));  // vocab_size
  trainer.integer(35, byte_pieces ? 1 : 0);                    // byte_fallback
  trainer.integer(40, unk);                                    // unk_id
  trainer.integer(41, piece_of(l.bos).empty() ? -1 : l.bos);   // bos_id
  trainer.integer(42, piece_of(l.eos).empty() ? -1 : l.eos);   // eos_id
  trainer.integer(43, -1);                                     // pad_id
  trainer.bytes(45, piece_of(unk));                            // unk_piece
  if (!piece_of(l.bos).empty()) trainer.bytes(46, piece_of(l.bos));  // bos_piece
  if (!piece_of(l.eos).empty()) trainer.bytes(47, piece_of(l.eos));  // eos_piece
  model.bytes(2, trainer.str());
  Proto normalizer;  // NormalizerSpec
  normalizer.bytes(1, "identity");
  normalizer.integer(3, l.dummy_prefix ? 1 : 0);  // add_dummy_prefix
  normalizer.integer(4, 0);                       // remove_extra_whitespaces
  normalizer.integer(5, 1);                       // escape_whitespaces
  model.bytes(3, normalizer.str());
  return model.str();
}

// A byte-level BPE model as Hugging Face's tokenizer.json spells it: the pre-tokenizer's regexes as Split
// steps, then ByteLevel; the special tokens as added tokens.
std::string hf_tokenizer_json(const BpeSpec& spec) {
  using nlohmann::ordered_json;
  ordered_json added = ordered_json::array();
  for (const auto& [text, id] : spec.specials)
    added.push_back({{"id", id}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  ordered_json steps = ordered_json::array();
  for (const std::string& p : spec.patterns)
    steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", p}}}, {"behavior", "Isolated"}, {"invert", false}});
  const ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", spec.add_prefix_space},
                                   {"trim_offsets", true}, {"use_regex", false}};
  steps.push_back(byte_level);
  ordered_json vocab = ordered_json::object();
  for (const auto& [bytes, id] : spec.vocab) vocab[bytes_to_symbols(bytes)] = id;
  ordered_json merges = ordered_json::array();
  for (const auto& [left, right] : spec.merges) merges.push_back(bytes_to_symbols(left) + " " + bytes_to_symbols(right));
  const ordered_json t = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", steps}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", spec.ignore_merges}, {"vocab", vocab}, {"merges", merges}}}};
  return t.dump(2) + "\n";
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_listing(const TokenizerListing& listing, const std::string& describe) {
  if (listing.kind == Listing::Kind::kByteBpe) return std::make_unique<BpeTokenizer>(bpe_spec(listing, describe));
  return SentencePieceTokenizer::from_serialized(sentencepiece_model(listing, describe), describe);
}

std::pair<std::string, std::string> tokenizer_file_from_listing(const TokenizerListing& listing,
                                                                const std::string& describe) {
  if (listing.kind == Listing::Kind::kByteBpe)
    return {"tokenizer.json", hf_tokenizer_json(bpe_spec(listing, describe))};
  return {"tokenizer.model", sentencepiece_model(listing, describe)};
}

}  // namespace axonn::text
