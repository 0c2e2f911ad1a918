#pragma once

// An AuditSink for tests: keeps every record it is given (with what it was given to digest), and
// either answers each at once (batched, or sync and OK/refusing) or holds the callbacks until the
// test releases them (sync, `hold`), so a test sees an answer wait for its record.

#include <mutex>
#include <string>
#include <vector>

#include "audit/sink.h"

namespace rampart::testing {

class CapturingSink final : public audit::AuditSink {
 public:
  struct Captured {
    audit::AuditRecord record;
    std::string request;
    std::string response;
    bool full = false;
  };
  struct Options {
    bool sync = false;
    bool hold = false;             // sync: keep the callbacks until Release
    Status refuse = Status::Ok();  // what the callbacks are told
  };
  explicit CapturingSink(Options options) : options_(std::move(options)) {}

  bool sync() const override { return options_.sync; }
  void Record(audit::AuditRecord&& record, audit::AuditContent content,
              UniqueFunction<void(Status)> done) override {
    {
      std::lock_guard lock(mutex_);
      captured_.push_back({std::move(record), std::string(content.request),
                           std::string(content.response), content.full});
      if (options_.hold) {
        held_.push_back(std::move(done));
        return;
      }
    }
    if (done) done(options_.refuse);
  }

  // Runs the held callbacks with `status`.
  void Release(Status status = Status::Ok()) {
    std::vector<UniqueFunction<void(Status)>> held;
    {
      std::lock_guard lock(mutex_);
      held.swap(held_);
    }
    for (auto& done : held) {
      if (done) done(status);
    }
  }
  std::vector<Captured> captured() const {
    std::lock_guard lock(mutex_);
    return captured_;
  }

 private:
  const Options options_;
  mutable std::mutex mutex_;
  std::vector<Captured> captured_;
  std::vector<UniqueFunction<void(Status)>> held_;
};

}  // namespace rampart::testing
