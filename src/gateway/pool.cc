#include "gateway/pool.h"

#include <algorithm>

#include "core/check.h"

namespace rampart::gateway {

UpstreamState::UpstreamState(UpstreamConfig config, EjectionConfig ejection,
                             HealthCheckConfig health)
    : config_(std::move(config)), ejection_(ejection), health_(health) {}

bool UpstreamState::Available(SteadyTime now) const {
  std::lock_guard lock(mutex_);
  return healthy_ && now >= ejected_until_ && now >= cooled_until_;
}

bool UpstreamState::Healthy() const {
  std::lock_guard lock(mutex_);
  return healthy_;
}

bool UpstreamState::RecordFailure(SteadyTime now) {
  std::lock_guard lock(mutex_);
  if (now < ejected_until_) return false;  // calls already under way when it was ejected
  if (++consecutive_failures_ < ejection_.consecutive_failures) return false;
  consecutive_failures_ = 0;
  ++ejections_;
  const auto length = std::min<std::chrono::milliseconds>(
      ejection_.base_ejection * static_cast<int64_t>(std::min<uint64_t>(ejections_, 1000)),
      ejection_.max_ejection);
  ejected_until_ = now + length;
  return true;
}

void UpstreamState::RecordSuccess() {
  std::lock_guard lock(mutex_);
  consecutive_failures_ = 0;
}

void UpstreamState::CoolDown(SteadyTime until) {
  std::lock_guard lock(mutex_);
  cooled_until_ = std::max(cooled_until_, until);
}

bool UpstreamState::ReportCheck(bool passed) {
  std::lock_guard lock(mutex_);
  if (passed == healthy_) {
    check_streak_ = 0;
    return false;
  }
  const int needed = healthy_ ? health_.unhealthy_threshold : health_.healthy_threshold;
  if (++check_streak_ < needed) return false;
  check_streak_ = 0;
  healthy_ = passed;
  if (passed) consecutive_failures_ = 0;
  return true;
}

uint64_t UpstreamState::ejections() const {
  std::lock_guard lock(mutex_);
  return ejections_;
}

Pool::Pool(std::vector<Member> members) : members_(std::move(members)) {
  CHECK(!members_.empty() && members_.size() <= kMaxMembers);
  std::stable_sort(members_.begin(), members_.end(),
                   [](const Member& a, const Member& b) { return a.priority > b.priority; });
  for (size_t i = 0; i < members_.size(); ++i) {
    if (i == 0 || members_[i].priority != members_[i - 1].priority) group_starts_.push_back(i);
  }
  current_weight_.assign(members_.size(), 0);
}

size_t Pool::RoundRobin(const std::vector<size_t>& candidates) {
  int64_t total = 0;
  size_t best = candidates.front();
  for (size_t index : candidates) {
    current_weight_[index] += members_[index].weight;
    total += members_[index].weight;
    if (current_weight_[index] > current_weight_[best]) best = index;
  }
  current_weight_[best] -= total;
  return best;
}

Pool::Pick Pool::Choose(uint64_t tried, SteadyTime now) {
  std::vector<bool> available(members_.size());
  for (size_t i = 0; i < members_.size(); ++i) available[i] = members_[i].upstream->Available(now);

  std::vector<size_t> candidates;
  candidates.reserve(members_.size());
  // Untried and available, then tried and available, each from the highest group down.
  for (bool allow_tried : {false, true}) {
    for (size_t group = 0; group < group_starts_.size(); ++group) {
      const size_t end =
          group + 1 < group_starts_.size() ? group_starts_[group + 1] : members_.size();
      candidates.clear();
      for (size_t i = group_starts_[group]; i < end; ++i) {
        const bool was_tried = (tried >> i) & 1;
        if (available[i] && (allow_tried || !was_tried)) candidates.push_back(i);
      }
      if (candidates.empty()) continue;
      std::lock_guard lock(mutex_);
      return Pick{.index = RoundRobin(candidates), .failover = group > 0, .panic = false};
    }
  }
  // Nothing available: every member, untried first.
  candidates.clear();
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!((tried >> i) & 1)) candidates.push_back(i);
  }
  if (candidates.empty()) {
    for (size_t i = 0; i < members_.size(); ++i) candidates.push_back(i);
  }
  std::lock_guard lock(mutex_);
  const size_t index = RoundRobin(candidates);
  return Pick{
      .index = index, .failover = members_[index].priority != members_[0].priority, .panic = true};
}

}  // namespace rampart::gateway
