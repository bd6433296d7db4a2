// core/output_file.hpp: outputs compared with inputs as files (device and inode), whatever their spelling.
#include "axonn/core/output_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "axonn/core/error.hpp"
#include "llmc_files.hpp"

namespace fs = std::filesystem;
using axonn::check_output_apart;
using axonn::NamedPath;

namespace {

void touch(const std::string& path) { std::ofstream(path) << "x"; }

// The message of the InvalidArgument `f` throws, or "<none>".
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const axonn::InvalidArgument& e) {
    return e.what();
  }
  return "<none>";
}

}  // namespace

TEST(OutputFile, OneFileWhateverItsSpelling) {
  axonn::test::TempDir d;
  fs::create_directories(d.file("a/b"));
  touch(d.file("a/b/f.txt"));
  fs::create_symlink(d.file("a/b"), d.file("link"));
  EXPECT_TRUE(axonn::same_file(d.file("a/b/f.txt"), d.file("a/./b/../b/f.txt")));
  EXPECT_TRUE(axonn::same_file(d.file("a/b/f.txt"), d.file("link/f.txt")));
  EXPECT_FALSE(axonn::same_file(d.file("a/b/f.txt"), d.file("a/b/new.txt")));  // absent: no file to be
  EXPECT_TRUE(axonn::same_path(d.file("a/b/new.txt"), d.file("a/b/../b/new.txt")));  // by name, until made
  EXPECT_TRUE(axonn::same_path(d.file("out"), d.file("out") + "/"));
  EXPECT_FALSE(axonn::same_path(d.file("out"), d.file("out2")));
  EXPECT_TRUE(axonn::path_inside(d.file("link/c/d/new.bin"), d.file("a")));  // through the link, not made yet
  EXPECT_FALSE(axonn::path_inside(d.file("a"), d.file("a")));
  EXPECT_FALSE(axonn::path_inside(d.file("other/x"), d.file("a")));
}

TEST(OutputFile, AnOutputThatIsOrLiesInAnInputIsRefusedNamingBoth) {
  axonn::test::TempDir d;
  fs::create_directories(d.file("corpus"));
  touch(d.file("corpus/doc.txt"));
  touch(d.file("model.bin"));
  const std::vector<NamedPath> inputs = {{"--init", d.file("model.bin")}, {"the input", d.file("corpus")}};
  EXPECT_EQ(refusal([&] { check_output_apart({"--output", d.file("model.bin")}, inputs); }),
            "--output '" + d.file("model.bin") + "' is --init '" + d.file("model.bin") +
                "', which this command reads: writing it would destroy the input. Give --output another path");
  const std::string inside = refusal([&] { check_output_apart({"--output", d.file("corpus/new/x.json")}, inputs); });
  EXPECT_NE(inside.find("--output '" + d.file("corpus/new/x.json") + "' lies inside the input '" + d.file("corpus") +
                        "', which this command reads: an output never goes into an input"),
            std::string::npos)
      << inside;
  EXPECT_EQ(refusal([&] { check_output_apart({"--output", d.file("x.json")}, inputs); }), "<none>");
}

TEST(OutputFile, AFileOutputThatNamesADirectoryIsRefused) {
  axonn::test::TempDir d;
  fs::create_directories(d.file("dir"));
  EXPECT_EQ(refusal([&] { axonn::check_output_file({"--out", d.file("dir")}); }),
            "--out '" + d.file("dir") + "' is a directory: give the path of a file to write");
  EXPECT_NE(refusal([&] { axonn::check_output_file({"--out", d.file("new") + "/"}); }), "<none>");
  EXPECT_EQ(refusal([&] { axonn::check_output_file({"--out", d.file("dir/page.html")}); }), "<none>");
}

// An atomic write renames a new file over its path: over a device or a pipe it would replace it with a file.
// `calibrate --out /dev/null`, run as root, replaced the system's /dev/null. Only a pipe of the test's own is
// written at; /dev/null is only looked at.
TEST(OutputFile, AnOutputThatIsADeviceOrAPipeIsRefusedAndKept) {
  axonn::test::TempDir d;
  ASSERT_EQ(::mkfifo(d.file("pipe").c_str(), 0600), 0);
  const std::string pipe = refusal([&] { axonn::check_output_file({"--out", d.file("pipe")}); });
  EXPECT_EQ(pipe, "--out '" + d.file("pipe") + "' is a named pipe (FIFO), not a regular file: an output is written "
                  "as a new file renamed over the old one, which would replace it; give the path of a file to write");
  EXPECT_NE(refusal([&] { axonn::check_replaceable_file("/dev/null", ""); }).find("'/dev/null' is a device"),
            std::string::npos);
  fs::create_symlink(d.file("pipe"), d.file("link"));  // a link to one: the link is followed
  EXPECT_NE(refusal([&] { axonn::check_replaceable_file(d.file("link"), "--out"); }).find("is a named pipe"),
            std::string::npos);
  touch(d.file("file"));
  EXPECT_EQ(refusal([&] { axonn::check_replaceable_file(d.file("file"), "--out"); }), "<none>");
  EXPECT_EQ(refusal([&] { axonn::check_replaceable_file(d.file("new"), "--out"); }), "<none>");
  EXPECT_TRUE(fs::is_fifo(d.file("pipe")));
}
