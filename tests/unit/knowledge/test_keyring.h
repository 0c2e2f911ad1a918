#pragma once

// A keyring for tests: versions kept in memory, the master key in a file of the test's folder.

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "crypto/keyring.h"
#include "testing/memory_keyring_storage.h"

namespace rampart::knowledge::testing {

using MemoryKeyringStorage = rampart::testing::MemoryKeyringStorage;

// A keyring whose master key is 64 hex digits of `fill`, with the snapshot key made.
struct TestKeyring {
  TestKeyring(const std::string& folder, char fill) {
    const std::string key_file = folder + "/master-" + fill;
    std::ofstream(key_file) << std::string(64, fill);
    std::filesystem::permissions(
        key_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    auto master = crypto::MasterKeyFromFile(key_file);
    EXPECT_TRUE(master.ok()) << master.status().ToString();
    auto opened = crypto::Keyring::Open(storage, std::move(*master));
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    keyring = std::move(*opened);
    const Status ensured =
        keyring->Ensure("knowledge:index", crypto::KeyPurpose::kWrapping, "aes-256-gcm");
    EXPECT_TRUE(ensured.ok()) << ensured.ToString();
  }
  MemoryKeyringStorage storage;
  std::unique_ptr<crypto::Keyring> keyring;
};

}  // namespace rampart::knowledge::testing
