// text/sentencepiece.hpp — SentencePiece models (tokenizer.model: Llama 2, TinyLlama) through
// Debian's libsentencepiece, and training one on the user's own text (`axonn tokenizer train`).
//
//   text::SentencePieceTokenizer sp("tokenizer.model");
//   std::string model = text::train_sentencepiece(options, next_sentence);   // serialized proto
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "axonn/text/tokenizer.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace axonn::text {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads a model file; IoError with SentencePiece's reason if it cannot. bos/eos are the model's
  // (Llama 2: 1 and 2); end-of-text is EOS.
  explicit SentencePieceTokenizer(const std::string& path);
  // A model held in memory (serialized ModelProto, as train_sentencepiece returns it).
  static std::unique_ptr<SentencePieceTokenizer> from_serialized(const std::string& model, std::string describe);
  ~SentencePieceTokenizer() override;

  std::string describe() const override { return describe_; }
  int vocab_size() const override;
  // SentencePiece never reads control tokens from text, so both encode alike.
  std::vector<int> encode(std::string_view text) const override;
  std::vector<int> encode_ordinary(std::string_view text) const override { return encode(text); }
  std::string decode(std::span<const int> ids) const override;
  bool decodes_by_concatenation() const override { return false; }
  bool implies_leading_space() const override { return dummy_prefix_; }
  std::optional<TokenizerListing> listing() const override;

 private:
  SentencePieceTokenizer();
  void take_specials();
  std::string describe_;
  bool dummy_prefix_ = false;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

// How `axonn tokenizer train` trains: a BPE model with Llama 2's settings (byte fallback, digits
// split, identity normalisation, whitespace kept, unk 0, bos 1, eos 2), so that any text encodes
// and decode(encode(x)) == x for UTF-8 text.
struct SentencePieceTrainOptions {
  int vocab_size = 8000;
  std::string model_type = "bpe";        // bpe | unigram
  double character_coverage = 0.99995;   // Llama 2's; rarer characters fall back to bytes
  int threads = 0;                       // 0: the hardware's
  int64_t max_sentences = 0;             // sample at most this many sentences (0: all)
  bool verbose = false;                  // SentencePiece's own progress log on stderr
};

// Trains on the sentences `next` yields (it returns false at the end) and returns the serialized
// model. Throws InvalidArgument with SentencePiece's reason, e.g. a vocabulary the text cannot fill.
std::string train_sentencepiece(const SentencePieceTrainOptions& options,
                                const std::function<bool(std::string&)>& next);

}  // namespace axonn::text
