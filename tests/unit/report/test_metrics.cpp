// report/metrics.hpp: the metrics JSON Lines reader, its errors (with the line number), and the
// tokens axis.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "axonn/core/error.hpp"
#include "axonn/report/metrics.hpp"

namespace axonn::report {
namespace {

// The message of the InvalidArgument that parsing `text` throws ("" if it does not throw).
std::string error_of(const std::string& text) {
  try {
    parse_metrics(text, "m.jsonl");
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(Metrics, ReadsTheTrainersLines) {
  const std::string text =
      "{\"grad_norm\":1.88,\"loss\":6.22,\"lr\":0.003,\"mfu\":0.0001,\"step\":0,\"step_ms\":100.0,\"tokens_per_s\":1280}\n"
      "\n"
      "{\"step\":1,\"loss\":null,\"val_loss\":5.5,\"memory_bytes\":[1048576,2097152],\"future_key\":\"ignored\"}\n"
      "{\"step\":2,\"memory_bytes\":4096}";  // no newline at the end
  const auto r = parse_metrics(text, "m.jsonl");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].line, 1);
  EXPECT_EQ(r[0].step, 0);
  EXPECT_DOUBLE_EQ(*r[0].loss, 6.22);
  EXPECT_DOUBLE_EQ(*r[0].lr, 0.003);
  EXPECT_DOUBLE_EQ(*r[0].grad_norm, 1.88);
  EXPECT_DOUBLE_EQ(*r[0].mfu, 0.0001);
  EXPECT_DOUBLE_EQ(*r[0].step_ms, 100.0);
  EXPECT_DOUBLE_EQ(*r[0].tokens_per_s, 1280);
  EXPECT_FALSE(r[0].val_loss);
  EXPECT_TRUE(r[0].memory_bytes.empty());
  EXPECT_EQ(r[1].line, 3);  // the blank line counts
  ASSERT_TRUE(r[1].loss);
  EXPECT_TRUE(std::isnan(*r[1].loss));  // null: NaN
  EXPECT_FALSE(r[1].lr);                // absent
  EXPECT_DOUBLE_EQ(*r[1].val_loss, 5.5);
  EXPECT_EQ(r[1].memory_bytes, (std::vector<double>{1048576, 2097152}));
  EXPECT_EQ(r[2].memory_bytes, (std::vector<double>{4096}));
}

TEST(Metrics, ErrorsNameTheFileAndLine) {
  const std::string good = "{\"step\":0,\"loss\":1}\n";
  std::string e = error_of(good + good + "{\"step\":2,\"loss\":\n");
  EXPECT_NE(e.find("metrics file 'm.jsonl', line 3: not valid JSON"), std::string::npos) << e;
  e = error_of("[1,2]\n");
  EXPECT_NE(e.find("line 1: not a JSON object"), std::string::npos) << e;
  e = error_of(good + "{\"loss\":2}\n");
  EXPECT_NE(e.find("line 2: no integer \"step\""), std::string::npos) << e;
  e = error_of("{\"step\":1.5}\n");
  EXPECT_NE(e.find("line 1: no integer \"step\""), std::string::npos) << e;
  e = error_of(good + "\n" + "{\"step\":1,\"loss\":\"abc\"}\n");
  EXPECT_NE(e.find("line 3: \"loss\" is \"abc\", not a number"), std::string::npos) << e;
  e = error_of("{\"step\":1,\"memory_bytes\":[1,\"x\"]}\n");
  EXPECT_NE(e.find("line 1: \"memory_bytes\" is \"x\", not a number"), std::string::npos) << e;
}

TEST(Metrics, AnEmptyFileIsAnError) {
  EXPECT_NE(error_of("").find("metrics file 'm.jsonl' is empty: no step was recorded"), std::string::npos);
  EXPECT_NE(error_of("\n  \n\r\n").find("is empty"), std::string::npos);
}

TEST(Metrics, AMissingFileIsAnIoError) {
  try {
    read_metrics_file("/nonexistent/m.jsonl");
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read metrics file '/nonexistent/m.jsonl'"), std::string::npos);
  }
}

TEST(Metrics, TokensAreGivenOrSummedFromRateAndTime) {
  const auto r = parse_metrics(
      "{\"step\":0}\n"                                      // nothing known yet
      "{\"step\":1,\"tokens_per_s\":1000,\"step_ms\":128}\n"  // 128 tokens
      "{\"step\":2,\"val_loss\":3}\n"                       // a validation line: still 128
      "{\"step\":3,\"tokens_per_s\":2000,\"step_ms\":64}\n"   // +128
      "{\"step\":4,\"tokens\":1000}\n"                      // given
      "{\"step\":5,\"tokens_per_s\":500,\"step_ms\":100}\n",  // +50
      "m");
  const auto t = cumulative_tokens(r);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_TRUE(std::isnan(t[0]));
  EXPECT_DOUBLE_EQ(t[1], 128);
  EXPECT_DOUBLE_EQ(t[2], 128);
  EXPECT_DOUBLE_EQ(t[3], 256);
  EXPECT_DOUBLE_EQ(t[4], 1000);
  EXPECT_DOUBLE_EQ(t[5], 1050);
}

}  // namespace
}  // namespace axonn::report
