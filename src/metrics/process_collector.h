#pragma once

// ProcessCollector: CPU and memory gauges refreshed at every scrape, read from /proc (Linux).
//
//   nv_cpu_utilization              gauge   host CPU busy fraction [0, 1] across all cores since
//                                           the previous scrape (/proc/stat), as Triton reports it
//   nv_cpu_memory_total_bytes       gauge   MemTotal (/proc/meminfo)
//   nv_cpu_memory_used_bytes        gauge   MemTotal - MemAvailable (/proc/meminfo)
//   process_cpu_seconds_total       counter this process's user + system CPU time
//                                           (/proc/self/stat); rate() gives its CPU fraction
//   process_resident_memory_bytes   gauge   this process's resident set (/proc/self/statm)
//
// Install it with
//   registry.AddCollector(std::make_unique<metrics::ProcessCollector>(registry));
// The collector registers its families in `registry` when constructed and keeps references to
// them, so it must not outlive that registry (owning it through AddCollector guarantees this).
//
// Errors: a /proc file that is missing or unreadable (not Linux, a sandbox) leaves the metrics
// it feeds at their previous values; scrapes never fail because of it.
//
// Thread safety: Collect() is called by the registry one scrape at a time; it is not for
// concurrent use on its own.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "metrics/registry.h"

namespace rampart::metrics {

// The aggregate "cpu" line of /proc/stat, in clock ticks.
struct HostCpuTimes {
  uint64_t busy = 0;   // user + nice + system + irq + softirq + steal
  uint64_t total = 0;  // busy + idle + iowait
};
Result<HostCpuTimes> ParseProcStat(std::string_view text);

struct HostMemory {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;  // MemAvailable, or MemFree + Buffers + Cached on old kernels
};
Result<HostMemory> ParseMemInfo(std::string_view text);

// utime + stime (fields 14 and 15 of /proc/<pid>/stat) in clock ticks.
Result<uint64_t> ParseProcessCpuTicks(std::string_view self_stat);
// Resident pages (second field of /proc/<pid>/statm).
Result<uint64_t> ParseResidentPages(std::string_view statm);

class ProcessCollector final : public Collector {
 public:
  struct Options {
    std::string proc_root = "/proc";  // tests point this at a directory of fake files
    // 0: read sysconf(_SC_CLK_TCK) and sysconf(_SC_PAGESIZE).
    uint64_t ticks_per_second = 0;
    uint64_t page_size = 0;
  };

  explicit ProcessCollector(Registry& registry) : ProcessCollector(registry, Options{}) {}
  ProcessCollector(Registry& registry, Options options);

  void Collect() override;

 private:
  void CollectHostCpu();
  void CollectHostMemory();
  void CollectProcess();

  const Options options_;
  Gauge& cpu_utilization_;
  Gauge& memory_total_;
  Gauge& memory_used_;
  Counter& process_cpu_seconds_;
  Gauge& process_resident_;

  std::optional<HostCpuTimes> previous_host_cpu_;
  uint64_t previous_process_ticks_ = 0;
};

}  // namespace rampart::metrics
