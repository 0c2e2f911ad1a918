#pragma once

// The fixture of the typed store suites: a fresh database of the backend per test, a Store open
// on it, and small helpers to build records.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "store/store.h"
#include "store/store_backends.h"

namespace rampart::store::testing {

#define STORE_ASSERT_OK(expr)                                    \
  do {                                                           \
    const ::rampart::Status store_status_ = (expr);              \
    ASSERT_TRUE(store_status_.ok()) << store_status_.ToString(); \
  } while (0)
#define STORE_EXPECT_OK(expr)                                    \
  do {                                                           \
    const ::rampart::Status store_status_ = (expr);              \
    EXPECT_TRUE(store_status_.ok()) << store_status_.ToString(); \
  } while (0)

template <typename Backend>
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status ready = backend_.SetUp();
    ASSERT_TRUE(ready.ok()) << ready.ToString();
    store_ = OpenOrDie();
  }

  // Another Store on the same database (a reopen, another process or replica); null on failure,
  // with the failure recorded.
  std::unique_ptr<Store> OpenOrDie() {
    auto opened = backend_.Open();
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? std::move(*opened) : nullptr;
  }

  int64_t GenerationOf(Store& store) {
    auto generation = store.Generation();
    EXPECT_TRUE(generation.ok()) << generation.status().ToString();
    return generation.ok() ? *generation : -1;
  }

  static ApiKey Key(std::string id, std::string tenant, std::string principal,
                    int64_t created_unix = 1000) {
    ApiKey key;
    key.id = std::move(id);
    key.tenant = std::move(tenant);
    key.principal = std::move(principal);
    key.name = "ci-pipeline";
    key.salt = "00112233445566778899aabbccddeeff";
    key.hash = std::string(64, 'a');
    key.created_unix = created_unix;
    return key;
  }

  Backend backend_;
  std::unique_ptr<Store> store_;
};

struct BackendNames {
  template <typename Backend>
  static std::string GetName(int) {
    return Backend::kShared ? "Postgres" : "Sqlite";
  }
};

using Backends = ::testing::Types<SqliteBackend, PostgresBackend>;

}  // namespace rampart::store::testing
