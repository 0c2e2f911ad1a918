#pragma once

// ReasonCounter: one counter family with a `reason` label whose values are known up front
// (refusals by cause). Count is a short scan of those values and a lock-free increment, so it may
// be called on I/O threads.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metrics/registry.h"

namespace rampart::metrics {

class ReasonCounter {
 public:
  // Creates `name`{reason} in `registry` (which must outlive this) with one child per reason,
  // each exposed at zero from the start.
  ReasonCounter(Registry& registry, std::string_view name, std::string_view help,
                const std::vector<std::string>& reasons) {
    CounterFamily& family = registry.Counter(name, help, {"reason"});
    for (const std::string& reason : reasons) {
      counters_.emplace_back(reason, &family.WithLabels({reason}));
    }
  }

  // Adds one for `reason`; a reason not given at construction is ignored.
  void Count(std::string_view reason) {
    for (auto& [name, counter] : counters_) {
      if (name == reason) {
        counter->Increment();
        return;
      }
    }
  }

 private:
  std::vector<std::pair<std::string, Counter*>> counters_;  // fixed after construction
};

}  // namespace rampart::metrics
