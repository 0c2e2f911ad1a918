#include "metrics/process_collector.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

namespace rampart::metrics {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return std::nullopt;
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return std::nullopt;
  return std::move(contents).str();
}

// Splits on runs of spaces and tabs.
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t position = 0;
  while (true) {
    size_t begin = line.find_first_not_of(" \t", position);
    if (begin == std::string_view::npos) break;
    size_t end = line.find_first_of(" \t", begin);
    fields.push_back(line.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (end == std::string_view::npos) break;
    position = end;
  }
  return fields;
}

std::optional<uint64_t> ParseUnsigned(std::string_view text) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string_view FirstLine(std::string_view text) { return text.substr(0, text.find('\n')); }

uint64_t SysconfOr(int name, uint64_t fallback) {
  long value = sysconf(name);
  return value > 0 ? static_cast<uint64_t>(value) : fallback;
}

}  // namespace

Result<HostCpuTimes> ParseProcStat(std::string_view text) {
  std::vector<std::string_view> fields = Fields(FirstLine(text));
  // cpu user nice system idle [iowait irq softirq steal guest guest_nice]; guest time is
  // already inside user and nice.
  if (fields.size() < 5 || fields[0] != "cpu") {
    return InvalidArgument("/proc/stat: first line is not the aggregate 'cpu' line");
  }
  uint64_t values[8] = {};
  for (size_t i = 0; i < 8 && i + 1 < fields.size(); ++i) {
    std::optional<uint64_t> value = ParseUnsigned(fields[i + 1]);
    if (!value) return InvalidArgument("/proc/stat: field {} is not a number", i + 2);
    values[i] = *value;
  }
  const uint64_t idle = values[3] + values[4];
  HostCpuTimes times;
  times.busy = values[0] + values[1] + values[2] + values[5] + values[6] + values[7];
  times.total = times.busy + idle;
  return times;
}

Result<HostMemory> ParseMemInfo(std::string_view text) {
  std::optional<uint64_t> total, available, free, buffers, cached;
  size_t position = 0;
  while (position < text.size()) {
    size_t end = text.find('\n', position);
    std::string_view line =
        text.substr(position, end == std::string_view::npos ? end : end - position);
    position = end == std::string_view::npos ? text.size() : end + 1;
    // "MemTotal:       16303588 kB"
    std::vector<std::string_view> fields = Fields(line);
    if (fields.size() < 2) continue;
    std::optional<uint64_t> kib = ParseUnsigned(fields[1]);
    if (!kib) continue;
    uint64_t bytes = *kib * 1024;
    if (fields[0] == "MemTotal:") total = bytes;
    if (fields[0] == "MemAvailable:") available = bytes;
    if (fields[0] == "MemFree:") free = bytes;
    if (fields[0] == "Buffers:") buffers = bytes;
    if (fields[0] == "Cached:") cached = bytes;
  }
  if (!total) return InvalidArgument("/proc/meminfo: no MemTotal");
  if (!available) {
    if (!free) return InvalidArgument("/proc/meminfo: neither MemAvailable nor MemFree");
    available = *free + buffers.value_or(0) + cached.value_or(0);
  }
  return HostMemory{*total, std::min(*available, *total)};
}

Result<uint64_t> ParseProcessCpuTicks(std::string_view self_stat) {
  // "pid (comm) state ppid ..." where comm may hold spaces and parentheses: fields after the
  // last ')' start at field 3 (state).
  size_t close = self_stat.rfind(')');
  if (close == std::string_view::npos) return InvalidArgument("/proc/self/stat: no ')'");
  std::vector<std::string_view> fields = Fields(FirstLine(self_stat.substr(close + 1)));
  constexpr size_t kUtime = 14 - 3, kStime = 15 - 3;
  if (fields.size() <= kStime) return InvalidArgument("/proc/self/stat: too few fields");
  std::optional<uint64_t> utime = ParseUnsigned(fields[kUtime]);
  std::optional<uint64_t> stime = ParseUnsigned(fields[kStime]);
  if (!utime || !stime) return InvalidArgument("/proc/self/stat: utime/stime not numbers");
  return *utime + *stime;
}

Result<uint64_t> ParseResidentPages(std::string_view statm) {
  std::vector<std::string_view> fields = Fields(FirstLine(statm));
  if (fields.size() < 2) return InvalidArgument("/proc/self/statm: too few fields");
  std::optional<uint64_t> pages = ParseUnsigned(fields[1]);
  if (!pages) return InvalidArgument("/proc/self/statm: resident is not a number");
  return *pages;
}

ProcessCollector::ProcessCollector(Registry& registry, Options options)
    : options_{std::move(options.proc_root),
               options.ticks_per_second ? options.ticks_per_second : SysconfOr(_SC_CLK_TCK, 100),
               options.page_size ? options.page_size : SysconfOr(_SC_PAGESIZE, 4096)},
      cpu_utilization_(registry
                           .Gauge("nv_cpu_utilization",
                                  "CPU utilization rate [0.0 - 1.0] across all cores since the "
                                  "previous scrape")
                           .WithLabels({})),
      memory_total_(registry.Gauge("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes")
                        .WithLabels({})),
      memory_used_(registry.Gauge("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes")
                       .WithLabels({})),
      process_cpu_seconds_(registry
                               .Counter("process_cpu_seconds_total",
                                        "Total user and system CPU time spent in seconds")
                               .WithLabels({})),
      process_resident_(
          registry.Gauge("process_resident_memory_bytes", "Resident memory size in bytes")
              .WithLabels({})) {}

void ProcessCollector::Collect() {
  CollectHostCpu();
  CollectHostMemory();
  CollectProcess();
}

void ProcessCollector::CollectHostCpu() {
  std::optional<std::string> text = ReadFile(options_.proc_root + "/stat");
  if (!text) return;
  Result<HostCpuTimes> now = ParseProcStat(*text);
  if (!now.ok()) return;
  // The first scrape has no previous reading and reports the average since boot.
  HostCpuTimes before = previous_host_cpu_.value_or(HostCpuTimes{});
  if (now->total > before.total && now->busy >= before.busy) {
    double busy = static_cast<double>(now->busy - before.busy);
    double total = static_cast<double>(now->total - before.total);
    cpu_utilization_.Set(std::min(1.0, busy / total));
  }
  // Otherwise no tick has passed (two scrapes in one tick): keep the last value.
  previous_host_cpu_ = *now;
}

void ProcessCollector::CollectHostMemory() {
  std::optional<std::string> text = ReadFile(options_.proc_root + "/meminfo");
  if (!text) return;
  Result<HostMemory> memory = ParseMemInfo(*text);
  if (!memory.ok()) return;
  memory_total_.Set(static_cast<double>(memory->total_bytes));
  memory_used_.Set(static_cast<double>(memory->total_bytes - memory->available_bytes));
}

void ProcessCollector::CollectProcess() {
  if (std::optional<std::string> text = ReadFile(options_.proc_root + "/self/stat")) {
    Result<uint64_t> ticks = ParseProcessCpuTicks(*text);
    if (ticks.ok() && *ticks > previous_process_ticks_) {
      // Counters only grow, so add what was spent since the previous scrape.
      process_cpu_seconds_.Add(static_cast<double>(*ticks - previous_process_ticks_) /
                               static_cast<double>(options_.ticks_per_second));
      previous_process_ticks_ = *ticks;
    }
  }
  if (std::optional<std::string> text = ReadFile(options_.proc_root + "/self/statm")) {
    Result<uint64_t> pages = ParseResidentPages(*text);
    if (pages.ok()) process_resident_.Set(static_cast<double>(*pages * options_.page_size));
  }
}

}  // namespace rampart::metrics
