#pragma once

// Observers: the seam through which exporters (src/metrics) see every request as it completes,
// without the serving core knowing about them.
//
// A ServerObserver is asked for one VersionObserver per loaded model version. VersionObserver
// methods are called from instance and timer threads, concurrently, once per event; they must be
// thread-safe, must not block, and should cost no more than a few atomic operations.

#include <cstdint>
#include <memory>

#include "model/config.h"
#include "serve/request.h"
#include "serve/statistics.h"

namespace rampart::serve {

class VersionObserver {
 public:
  virtual ~VersionObserver() = default;
  // The version finished loading (its instances are created), after `seconds`.
  virtual void OnLoaded(double seconds) = 0;
  // One backend execution of `batch_size` items.
  virtual void OnExecution(uint64_t batch_size) = 0;
  virtual void OnSuccess(const RequestTiming& timing, int64_t total_ns, uint64_t batch_items) = 0;
  virtual void OnFailure(FailureReason reason, int64_t total_ns) = 0;
  // Ensembles only: the spread between the finish times of the ensemble's parallel branches.
  virtual void OnEnsembleAlignment(int64_t /*alignment_ns*/) {}
};

class ServerObserver {
 public:
  virtual ~ServerObserver() = default;
  // Called once per version as it starts loading; may return nullptr to observe nothing.
  virtual std::unique_ptr<VersionObserver> ForVersion(const model::ModelConfig& config,
                                                      int64_t version) = 0;
};

}  // namespace rampart::serve
