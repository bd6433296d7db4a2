#include "axonn/text/sentencepiece.hpp"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <regex>
#include <thread>
#include <unordered_map>

#include "axonn/core/error.hpp"

namespace axonn::text {

SentencePieceTokenizer::SentencePieceTokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

namespace {

// Runs one of the library's loads. Most faults come back as a Status, but a piece the library's Darts
// trie cannot hold (an empty key once read as a C string, i.e. a piece that starts with a NUL byte) is
// thrown as Darts' own exception, derived from std::exception; either becomes the Status we report.
template <typename Load>
sentencepiece::util::Status guarded_load(Load&& load) {
  try {
    return load();
  } catch (const std::exception& e) {
    return sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, e.what());
  }
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path) : SentencePieceTokenizer() {
  describe_ = "SentencePiece (" + path + ")";
  const auto status = guarded_load([&] { return sp_->Load(path); });
  AXONN_CHECK_IO(status.ok(), "cannot load SentencePiece model '", path, "': ",
                 status.code() == sentencepiece::util::StatusCode::kInternal ? "not a SentencePiece model file (" : "(",
                 status.ToString(), ")");
  take_specials();
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_serialized(const std::string& model,
                                                                                std::string describe) {
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->describe_ = std::move(describe);
  const auto status = guarded_load([&] { return t->sp_->LoadFromSerializedProto(model); });
  AXONN_CHECK_IO(status.ok(), "cannot load SentencePiece model ", t->describe_, ": ", status.ToString());
  t->take_specials();
  return t;
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

void SentencePieceTokenizer::take_specials() {
  bos_ = sp_->bos_id();
  eos_ = sp_->eos_id();
  eot_ = eos_;
  // The model's normalizer spec says whether it adds a dummy prefix, but Debian ships no header for
  // the proto that holds it; the first piece of "x" tells: "▁x" (or "▁") with the prefix, "x" without.
  std::vector<std::string> pieces;
  dummy_prefix_ = sp_->Encode("x", &pieces).ok() && !pieces.empty() && pieces[0].starts_with("\xE2\x96\x81");
}

int SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::vector<int> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  AXONN_CHECK_ARG(status.ok(), describe_, " cannot encode the text: ", status.ToString());
  return ids;
}

std::string SentencePieceTokenizer::decode(std::span<const int> ids) const {
  for (int id : ids)
    AXONN_CHECK_ARG(id >= 0 && id < vocab_size(), "token id ", id, " is not in the vocabulary of ", describe_, " (",
                    vocab_size(), " ids)");
  std::string text;
  const auto status = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  AXONN_CHECK_ARG(status.ok(), describe_, " cannot decode: ", status.ToString());
  return text;
}

std::optional<TokenizerListing> SentencePieceTokenizer::listing() const {
  TokenizerListing l;
  l.kind = TokenizerListing::Kind::kSentencePiece;
  l.dummy_prefix = dummy_prefix_;
  l.bos = bos_;
  l.eos = eos_;
  l.eot = eot_;
  const int n = vocab_size();
  for (int id = 0; id < n; id++) {
    l.tokens.push_back(sp_->IdToPiece(id));
    l.scores.push_back(sp_->GetScore(id));
    l.types.push_back(sp_->IsUnknown(id)   ? TokenizerListing::kUnknown
                      : sp_->IsControl(id) ? TokenizerListing::kControl
                      : sp_->IsUnused(id)  ? TokenizerListing::kUnused
                      : sp_->IsByte(id)    ? TokenizerListing::kByte
                                           : TokenizerListing::kNormal);
  }
  return l;
}

namespace {

// SentencePiece's pull interface over our callback.
class Sentences final : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(const std::function<bool(std::string&)>& next) : next_(next) { Next(); }
  bool done() const override { return done_; }
  void Next() override { done_ = !next_(value_); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::function<bool(std::string&)>& next_;
  std::string value_;
  bool done_ = false;
};

}  // namespace

std::string train_sentencepiece(const SentencePieceTrainOptions& o, const std::function<bool(std::string&)>& next) {
  AXONN_CHECK_ARG(o.vocab_size > 0, "--vocab-size must be positive, got ", o.vocab_size);
  AXONN_CHECK_ARG(o.model_type == "bpe" || o.model_type == "unigram", "--model-type must be bpe or unigram, got '",
                  o.model_type, "'");
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "true"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"max_sentence_length", "65536"},
      {"input_sentence_size", std::to_string(o.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
      {"minloglevel", o.verbose ? "0" : "2"},
  };
  Sentences sentences(next);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &sentences, &model);
  if (!status.ok()) {
    // its two size refusals in our flags' words (the library names its own options and source lines)
    const std::string why = status.ToString();
    std::smatch m;
    if (std::regex_search(why, m, std::regex(R"(smaller than required_chars\. (\d+) vs (\d+))")))
      throw InvalidArgument("--vocab-size " + m[1].str() + " is smaller than the " + m[2].str() + " pieces the text "
                            "needs (its characters, the 256 bytes of the byte fallback and the special pieces): give "
                            "--vocab-size " + m[2].str() + " or more, or a lower --character-coverage");
    const std::regex too_high(R"(Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+))");
    if (std::regex_search(why, m, too_high))
      throw InvalidArgument("--vocab-size " + m[1].str() + " is more than this text can fill (at most " + m[2].str() +
                            " pieces for the " + o.model_type + " model): give --vocab-size " + m[2].str() +
                            " or less, or more text");
    throw InvalidArgument("SentencePiece training failed: " + why);
  }
  return model;
}

}  // namespace axonn::text
