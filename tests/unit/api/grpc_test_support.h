#pragma once

// A real InferenceServer for the gRPC front end's tests: a temp model repository served by a fake
// backend, so the tests drive every RPC over a real loopback channel without LibTorch.
//
// Models (all version 1, backend "fake"):
//   add         INT32 INPUT0, INPUT1 [-1], max_batch_size 8 -> OUTPUT0 = sum, OUTPUT1 = difference
//   echo_bytes  BYTES INPUT0 [-1]                            -> OUTPUT0 = INPUT0
//   echo_fp16   FP16 INPUT0 [-1]                             -> OUTPUT0 = INPUT0
//   gate        INT32 INPUT0 [1], 3 instances                -> OUTPUT0 = INPUT0, once released
//   gate1       as gate, 1 instance
//   gate_queue  as gate1 with max_batch_size 1 and a queue that allows `timeout` overrides

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "serve/server.h"

namespace rampart::testing {

// Executions of the gate models block until the test releases their key (INPUT0's value).
class Gate {
 public:
  // Called on an instance thread.
  void Enter(int32_t key);
  // Waits until `count` executions have entered; false after 10 s.
  bool WaitEntered(size_t count);
  void Release(int32_t key);
  // Lets every execution through, now and later.
  void Open();
  std::vector<int32_t> entered() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int32_t> entered_;     // guarded by mutex_
  std::multiset<int32_t> released_;  // guarded by mutex_
  bool open_ = false;                // guarded by mutex_
};

std::unique_ptr<backend::Backend> MakeFakeBackend(Gate& gate);

// Writes the repository described above under `directory`.
void WriteFakeRepository(const std::filesystem::path& directory);

template <typename T>
std::string ToBytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
std::vector<T> FromBytes(const std::string& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::copy_n(bytes.data(), values.size() * sizeof(T), reinterpret_cast<char*>(values.data()));
  return values;
}

}  // namespace rampart::testing
