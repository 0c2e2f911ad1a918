#include "serve/tenant_shares.h"

namespace rampart::serve {

TenantShares::TenantShares(std::string model, int instances)
    : model_(std::move(model)), instances_(instances) {}

int64_t TenantShares::SecondOf(SteadyTime time) {
  return std::chrono::duration_cast<std::chrono::seconds>(time.time_since_epoch()).count() /
         kBucket.count();
}

int64_t TenantShares::Used(const Usage& usage, int64_t now) {
  int64_t used = 0;
  for (int b = 0; b < kBuckets; ++b) {
    if (usage.second[b] > now - kBuckets && usage.second[b] <= now) used += usage.nanos[b];
  }
  return used;
}

void TenantShares::Set(const std::map<std::string, double>& shares) {
  std::lock_guard lock(mutex_);
  std::erase_if(tenants_, [&](const auto& entry) { return !shares.contains(entry.first); });
  for (const auto& [tenant, share] : shares) {
    auto [it, added] = tenants_.try_emplace(tenant);
    if (added) it->second.second.fill(-1);
    it->second.share = share;
  }
}

Status TenantShares::Admit(std::string_view tenant, SteadyTime now) {
  std::lock_guard lock(mutex_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return Status::Ok();
  const Usage& usage = it->second;
  const double allowed =
      usage.share * instances_ * static_cast<double>(ToNanos(kBucket * kBuckets));
  if (static_cast<double>(Used(usage, SecondOf(now))) <= allowed) return Status::Ok();
  return ResourceExhausted("tenant '{}' is over its {:g}% share of model '{}'", tenant,
                           usage.share * 100, model_);
}

void TenantShares::Charge(std::string_view tenant, int64_t nanos, SteadyTime now) {
  std::lock_guard lock(mutex_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return;
  const int64_t second = SecondOf(now);
  const auto bucket = static_cast<size_t>(second % kBuckets);
  Usage& usage = it->second;
  if (usage.second[bucket] != second) {
    usage.second[bucket] = second;
    usage.nanos[bucket] = 0;
  }
  usage.nanos[bucket] += std::max<int64_t>(nanos, 0);
}

}  // namespace rampart::serve
