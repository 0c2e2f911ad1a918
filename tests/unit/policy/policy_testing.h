#pragma once

// Helpers for the policy tests: a temporary directory of policy files.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace rampart::policy::testing {

// A fresh directory under the test temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "policy_test_XXXXXX";
    EXPECT_NE(mkdtemp(pattern.data()), nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes (or replaces) `name` and returns its path.
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string path = path_ + "/" + name;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    return path;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace rampart::policy::testing
