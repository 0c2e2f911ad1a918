#pragma once

// InferRequest and InferResponse: what every protocol front end hands to the InferenceServer and
// gets back. Requests and responses move as unique_ptr; ownership passes with them.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/exceptions.h"
#include "core/status.h"
#include "core/unique_function.h"
#include "tensor/tensor.h"

namespace rampart::serve {

inline constexpr int64_t kLatestVersion = -1;

struct InferRequest {
  std::string model_name;
  int64_t model_version = kLatestVersion;
  std::string id;  // echoed in the response
  std::vector<tensor::Tensor> inputs;
  // Names of the outputs to return; empty returns every output the model declares.
  std::vector<std::string> requested_outputs;
  // Priority level, 1 = highest; 0 = the model's default (Triton's `priority` parameter).
  uint64_t priority = 0;
  // Queue timeout in microseconds; 0 = the model's default. Only shortens that default, and only
  // where the model's queue policy allows it (Triton's `timeout` parameter).
  uint64_t timeout_us = 0;
  // Set by the front end when the client has gone away; such requests never reach a backend.
  std::shared_ptr<const std::atomic<bool>> cancelled;
  // The caller's tenant, for the tenants' shares of instance time (serve/tenant_shares.h);
  // empty = not subject to shares.
  std::string tenant;
  // When the front end finished reading the request; the start of its end-to-end latency.
  SteadyTime arrival{};

  bool IsCancelled() const { return cancelled && cancelled->load(std::memory_order_relaxed); }
};

// Where one request's time went, in nanoseconds (the same numbers the statistics add up).
struct RequestTiming {
  int64_t queue_ns = 0;
  int64_t compute_input_ns = 0;
  int64_t compute_infer_ns = 0;
  int64_t compute_output_ns = 0;
};

// One ensemble step's span, in nanoseconds after the ensemble request's arrival.
struct StepTiming {
  std::string model;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct InferResponse {
  std::string model_name;
  int64_t model_version = 0;
  std::string id;
  std::vector<tensor::Tensor> outputs;  // in the model's config order
  RequestTiming timing;
  std::vector<StepTiming> steps;  // ensembles only
  int64_t alignment_ns = 0;       // ensembles only: spread of the final steps' finish times
};

// Called exactly once per request, on a server thread (never the caller's I/O thread while it
// waits); it must not block.
using InferCallback = UniqueFunction<void(Result<std::unique_ptr<InferResponse>>)>;

// A request's callback made to run exactly once however the request ends: destroyed without
// having been called (an exception on the way dropped the request), it calls itself with Internal
// then, so that no client waits forever and nothing counted for the request stays counted.
// Move-only; a moved-from one is disarmed.
template <typename Callback>
class AnsweredOnce {
 public:
  explicit AnsweredOnce(Callback callback) : callback_(std::move(callback)) {}
  AnsweredOnce(AnsweredOnce&& other) noexcept
      : callback_(std::move(other.callback_)), armed_(std::exchange(other.armed_, false)) {}
  AnsweredOnce& operator=(AnsweredOnce&&) = delete;
  ~AnsweredOnce() {
    if (!armed_) return;
    RunLoggingExceptions("answering a dropped request", [this] {
      (*this)(Internal("the request was dropped without an answer (see the server's log)"));
    });
  }

  void operator()(Result<std::unique_ptr<InferResponse>> result) {
    armed_ = false;
    callback_(std::move(result));
  }

 private:
  Callback callback_;
  bool armed_ = true;
};

}  // namespace rampart::serve
