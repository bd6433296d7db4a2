#include <gtest/gtest.h>

#include <cstring>

#include "axonn/core/error.hpp"
#include "axonn/text/llmc_tokenizer.hpp"
#include "axonn/text/sentencepiece.hpp"
#include "expect_error.hpp"
#include "llmc_files.hpp"
#include "text_test_util.hpp"

using namespace axonn;
using Ids = std::vector<int>;

namespace {

// An llm.c tokenizer file with the given header and tokens.
void write_llmc(const std::string& path, std::vector<int32_t> header, const std::vector<std::string>& tokens) {
  header.resize(256, 0);
  std::string b(reinterpret_cast<const char*>(header.data()), 1024);
  for (const auto& t : tokens) {
    b += static_cast<char>(t.size());
    b += t;
  }
  test::write_text(path, b);
}

}  // namespace

// llm.c's file, written by an independent Python writer from GPT-2's encoder.json, decodes every id
// to the bytes GPT-2's BPE gives it, and real text back to itself.
TEST(LlmcTokenizer, DecodesAsGpt2sBpe) {
  AXONN_REQUIRE_GPT2(bpe);
  test::TempDir d;
  const std::string bin = d.file("gpt2_tokenizer.bin");
  ASSERT_TRUE(test::run_command("python3 " AXONN_TEXT_TEST_DIR "/write_llmc_tokenizer.py '" + *bpe_dir +
                                "/encoder.json' " + bin).has_value());
  auto llmc = text::load_tokenizer(bin);
  EXPECT_FALSE(llmc->can_encode());
  EXPECT_EQ(llmc->vocab_size(), 50257);
  EXPECT_EQ(llmc->eot_id(), 50256);
  for (int id = 0; id < 50257; id++) {
    const int one[1] = {id};
    ASSERT_EQ(llmc->decode(one), bpe->decode(one)) << "id " << id;
  }
  std::vector<std::string> docs = test::fortunes();
  if (docs.size() > 200) docs.resize(200);
  docs.push_back("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  for (const auto& doc : docs) ASSERT_EQ(llmc->decode(bpe->encode(doc)), doc);
  try {
    llmc->encode("x");
    ADD_FAILURE() << "encode must refuse";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("can only decode"), std::string::npos) << e.what();
  }
}

// A streamed decode prints whole characters only, however the ids cut them.
TEST(StreamDecoder, EmitsOnlyCompleteUtf8) {
  test::TempDir d;
  // ids: 0 "a", 1 "\xE2", 2 "\x82\xAC" (the two halves of the euro sign), 3 "\xFF", 4 "<|endoftext|>"
  write_llmc(d.file("t.bin"), {text::kLlmcTokenizerMagic, 2, 5, 4}, {"a", "\xE2", "\x82\xAC", "\xFF", "<|endoftext|>"});
  text::LlmcTokenizer t(d.file("t.bin"));
  text::StreamDecoder s(t);
  EXPECT_EQ(s.push(0), "a");
  EXPECT_EQ(s.push(1), "");
  EXPECT_EQ(s.push(2), "\xE2\x82\xAC");
  EXPECT_EQ(s.push(3), "\xEF\xBF\xBD");
  EXPECT_EQ(s.push(1), "");
  EXPECT_EQ(s.finish(), "\xEF\xBF\xBD");
  EXPECT_THROW(t.decode(Ids{5}), InvalidArgument);
}

TEST(LlmcTokenizer, RefusesBrokenFilesWithClearErrors) {
  test::TempDir d;
  write_llmc(d.file("v1.bin"), {text::kLlmcTokenizerMagic, 1, 3}, {"a", "b", "c"});
  test::expect_error_with([&] { text::LlmcTokenizer t(d.file("v1.bin")); }, "version 1 with 3 tokens");
  write_llmc(d.file("v3.bin"), {text::kLlmcTokenizerMagic, 3, 1, 0}, {"a"});
  test::expect_error_with([&] { text::LlmcTokenizer t(d.file("v3.bin")); }, "has version 3");
  write_llmc(d.file("magic.bin"), {123, 2, 1, 0}, {"a"});
  test::expect_error_with([&] { text::LlmcTokenizer t(d.file("magic.bin")); }, "has magic 123");
  write_llmc(d.file("short.bin"), {text::kLlmcTokenizerMagic, 2, 3, 0}, {"a", "bcdef"});
  test::expect_error_with([&] { text::LlmcTokenizer t(d.file("short.bin")); }, "truncated: it ends before token 2 of 3");
  // a count the file cannot hold is refused before anything is allocated (found by fuzz_llmc_tokenizer)
  write_llmc(d.file("count.bin"), {text::kLlmcTokenizerMagic, 2, 1000000, 0}, {"a"});
  test::expect_error_with([&] { text::LlmcTokenizer t(d.file("count.bin")); },
                          "declares 1000000 tokens, more than the 2 bytes after its header can hold");
  write_llmc(d.file("zero.bin"), {text::kLlmcTokenizerMagic, 2, 2, 0}, {"a", ""});
  test::expect_error_with([&] { text::LlmcTokenizer t(d.file("zero.bin")); }, "gives token 1 length 0");
  write_llmc(d.file("extra.bin"), {text::kLlmcTokenizerMagic, 2, 1, 0}, {"a", "b"});
  test::expect_error_with([&] { text::LlmcTokenizer t(d.file("extra.bin")); }, "2 bytes after its last token");
  write_llmc(d.file("eot.bin"), {text::kLlmcTokenizerMagic, 2, 1, 7}, {"a"});
  test::expect_error_with([&] { text::LlmcTokenizer t(d.file("eot.bin")); }, "end-of-text id 7");
  test::write_text(d.file("tiny.bin"), "abc");
  test::expect_error_with([&] { text::LlmcTokenizer t(d.file("tiny.bin")); }, "shorter than its 1024-byte header");
}

namespace {

// Sentences for training: the lines of the first fortunes, or of a built-in text without them.
std::vector<std::string> training_lines(size_t max_docs) {
  std::vector<std::string> docs = test::fortunes();
  if (docs.empty()) {
    for (int i = 0; i < 400; i++)
      docs.push_back("The quick brown fox " + std::to_string(i) + " jumps over the lazy dog.\nPack my box with "
                     "five dozen liquor jugs, said the sphinx of black quartz.");
  }
  if (docs.size() > max_docs) docs.resize(max_docs);
  std::vector<std::string> lines;
  for (const auto& d : docs) {
    std::istringstream s(d);
    for (std::string l; std::getline(s, l);)
      if (!l.empty()) lines.push_back(l);
  }
  return lines;
}

}  // namespace

// A model trained by axonn (Llama 2's recipe: BPE, byte fallback) round-trips real text, text it
// never saw, and characters outside its alphabet (through byte fallback), and reloads from disk.
TEST(SentencePiece, TrainedModelRoundTrips) {
  const std::vector<std::string> lines = training_lines(2000);
  size_t next = 0;
  text::SentencePieceTrainOptions o;
  o.vocab_size = 600;
  o.threads = 2;
  const std::string model = text::train_sentencepiece(o, [&](std::string& s) {
    if (next >= lines.size()) return false;
    s = lines[next++];
    return true;
  });
  auto sp = text::SentencePieceTokenizer::from_serialized(model, "trained in the test");
  EXPECT_EQ(sp->vocab_size(), 600);
  EXPECT_EQ(sp->bos_id(), 1);
  EXPECT_EQ(sp->eos_id(), 2);
  EXPECT_EQ(sp->document_separator(), 1);
  std::vector<std::string> texts(lines.begin(), lines.begin() + std::min<size_t>(lines.size(), 500));
  texts.push_back("Text it never saw: 12345, tabs\tand  double  spaces,\nnewlines and a trailing space ");
  texts.push_back("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87");  // byte fallback
  for (const auto& t : texts) {
    const Ids ids = sp->encode(t);
    for (int id : ids) ASSERT_TRUE(id >= 0 && id < sp->vocab_size());
    ASSERT_EQ(sp->decode(ids), t);
  }
  test::TempDir d;
  test::write_text(d.file("tokenizer.model"), model);
  auto loaded = text::load_tokenizer(d.file(""));  // the directory's tokenizer.model
  EXPECT_EQ(loaded->encode(texts[0]), sp->encode(texts[0]));
  // the streamed decode is the whole decode, piece by piece
  const Ids ids = sp->encode(texts.back());
  text::StreamDecoder s(*sp);
  std::string streamed;
  for (int id : ids) streamed += s.push(id);
  streamed += s.finish();
  EXPECT_EQ(streamed, texts.back());
  // its whole vocabulary for other formats (GGUF): pieces, scores, SentencePiece's types, the dummy prefix
  const std::optional<text::TokenizerListing> l = sp->listing();
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->kind, text::TokenizerListing::Kind::kSentencePiece);
  ASSERT_EQ(l->tokens.size(), 600u);
  ASSERT_EQ(l->scores.size(), 600u);
  EXPECT_EQ(l->types[0], text::TokenizerListing::kUnknown);
  EXPECT_EQ(l->types[1], text::TokenizerListing::kControl);
  EXPECT_EQ(l->types[2], text::TokenizerListing::kControl);
  EXPECT_EQ(l->tokens[3], "<0x00>");  // byte fallback: the 256 bytes after the specials
  EXPECT_EQ(l->types[3], text::TokenizerListing::kByte);
  EXPECT_EQ(l->types[599], text::TokenizerListing::kNormal);
  EXPECT_TRUE(l->dummy_prefix);
  // a long text in pieces (the space at each cut is the dummy prefix's "▁") encodes as the whole
  EXPECT_TRUE(sp->implies_leading_space());
  std::string joined;
  for (const auto& l : lines) joined += l + (joined.size() % 5 ? " " : "\n");
  test::expect_pieces_encode_as_whole(*sp, joined, 2000);
}

TEST(SentencePiece, RefusesBadModelsAndImpossibleVocabularies) {
  test::TempDir d;
  test::write_text(d.file("bad.model"), "this is not a protobuf");
  test::expect_error_with([&] { text::load_tokenizer(d.file("bad.model")); }, "cannot load SentencePiece model");
  test::expect_error_with([&] { text::load_tokenizer(d.file("absent.model")); }, "no such file or directory");
  // A well-formed protobuf whose piece starts with a NUL byte: SentencePiece's Darts trie throws its own
  // exception (not a Status) while it loads the pieces; the file is refused with its name (fuzz corpus
  // sentencepiece/nul-piece.model, found by fuzz_sentencepiece).
  test::write_text(d.file("nul-piece.model"), std::string("\x0a\x09\x0a\x05<unk>\x18\x02\x0a\x03\x0a\x01\x00", 16));
  test::expect_error_with([&] { text::load_tokenizer(d.file("nul-piece.model")); },
                          "cannot load SentencePiece model '" + d.file("nul-piece.model") + "'");
  const std::vector<std::string> lines = {"a tiny corpus", "of two lines"};
  size_t next = 0;
  text::SentencePieceTrainOptions o;
  o.vocab_size = 5000;
  try {
    text::train_sentencepiece(o, [&](std::string& s) {
      if (next >= lines.size()) return false;
      s = lines[next++];
      return true;
    });
    ADD_FAILURE() << "training must refuse a vocabulary the text cannot fill";
  } catch (const InvalidArgument& e) {
    // in the flags' words, with the size that fits (before: the library's "Vocabulary size too high")
    EXPECT_NE(std::string(e.what()).find("--vocab-size 5000 is more than this text can fill (at most "),
              std::string::npos) << e.what();
  }
}
