#pragma once

// TenantShares: the share of one model version's instance time each tenant may use (issue 22's
// per-team accelerator quota, here instance time; docs/quotas.md).
//
// Over a sliding window of kBuckets one-second buckets, the instance time a tenant's requests
// consumed (each execution's wall time divided among its requests in proportion to their batch
// items, charged when it ends, failed executions included) may not exceed
// share x instances x window. A request arriving while its tenant is over is refused at
// admission; requests already queued run. The measure is after the fact: a tenant can pass its
// share by what its requests queued before the window filled take, and then waits until the
// window slides below its share again. Tenants without a share, and requests without a tenant,
// are not limited and not counted.
//
// Thread safety: every method may be called from any thread (one mutex, held for a few
// additions).

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/status.h"

namespace rampart::serve {

// One tenant's share of one model's instance time (InferenceServer::SetInstanceShares).
struct InstanceShare {
  std::string model;
  std::string tenant;
  double share = 1.0;  // in (0, 1]
};

class TenantShares {
 public:
  static constexpr int kBuckets = 10;
  static constexpr std::chrono::seconds kBucket{1};

  // `model` names the model in refusals; `instances` is the version's instance count.
  TenantShares(std::string model, int instances);

  // Replaces the shares (tenant -> share in (0, 1]); usage already counted for a tenant that
  // keeps a share is kept.
  void Set(const std::map<std::string, double>& shares);

  // OK, or ResourceExhausted "tenant 'acme' is over its 50% share of model 'simple'".
  Status Admit(std::string_view tenant, SteadyTime now);

  // Charges `nanos` of instance time to `tenant` (nothing for a tenant without a share).
  void Charge(std::string_view tenant, int64_t nanos, SteadyTime now);

 private:
  struct Usage {
    double share = 1.0;
    std::array<int64_t, kBuckets> second{};  // the second each bucket counts (-1: none)
    std::array<int64_t, kBuckets> nanos{};
  };
  static int64_t SecondOf(SteadyTime time);
  // The time `usage` consumed in the window ending in second `now` (with mutex_ held).
  static int64_t Used(const Usage& usage, int64_t now);

  const std::string model_;
  const int instances_;
  std::mutex mutex_;
  std::map<std::string, Usage, std::less<>> tenants_;  // guarded by mutex_
};

}  // namespace rampart::serve
