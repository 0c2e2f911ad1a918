// How long this machine takes its CPUs away from a running thread: the floor under any latency
// tail measured on it (bench/batching_bench.sh reports it beside the batching p99).
//
// One thread per CPU, each pinned to its CPU at the caller's priority, reads the monotonic clock
// in a loop for --seconds. A gap between two reads of --min-gap-us or more is a stall: the
// thread was not running (an interrupt, a kernel thread, another process, or a hypervisor that
// descheduled the virtual CPU). Stalls on different CPUs that overlap in time are merged, since
// a pipeline that uses every CPU (an HTTP front end on one, a model instance on another) is held
// up by a stall on any of them, once.
//
//   stall_probe [--seconds 5] [--cpus 0-3] [--min-gap-us 200] [--threshold-us N]
//
// Prints key=value lines: per CPU `cpuN_stalled_ms_per_s` and `cpuN_max_stall_us`; merged over
// the CPUs `stalled_ms_per_s`, `max_stall_us` and `stalls_per_s_ge_<T>us` for T in 500 µs ... 10
// ms, and `stalls_per_s_ge_threshold` when --threshold-us is given. Run it on an otherwise idle
// machine: it keeps every CPU it probes busy.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/cpu_affinity.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Stall {
  int64_t start_ns;
  int64_t end_ns;
};

int64_t Nanoseconds(Clock::time_point time) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}

// Spins on `cpu` until `end`, recording every gap of at least `min_gap_ns` between clock reads.
// Sets `failed` (and records nothing) when the thread cannot be pinned.
std::vector<Stall> Probe(int cpu, Clock::time_point end, int64_t min_gap_ns,
                         std::atomic<bool>& failed) {
  std::vector<Stall> stalls;
  if (auto status = rampart::PinThisThread({cpu}); !status.ok()) {
    std::fprintf(stderr, "cpu %d: %s\n", cpu, status.ToString().c_str());
    failed = true;
    return stalls;
  }
  stalls.reserve(1 << 16);
  Clock::time_point previous = Clock::now();
  while (previous < end) {
    const Clock::time_point now = Clock::now();
    if (now - previous >= std::chrono::nanoseconds(min_gap_ns)) {
      stalls.push_back({Nanoseconds(previous), Nanoseconds(now)});
    }
    previous = now;
  }
  return stalls;
}

int64_t Length(const Stall& stall) { return stall.end_ns - stall.start_ns; }

int64_t TotalLength(const std::vector<Stall>& stalls) {
  int64_t total = 0;
  for (const Stall& stall : stalls) total += Length(stall);
  return total;
}

int64_t LongestLength(const std::vector<Stall>& stalls) {
  int64_t longest = 0;
  for (const Stall& stall : stalls) longest = std::max(longest, Length(stall));
  return longest;
}

// The union of the stalls, as disjoint intervals in time order.
std::vector<Stall> Merge(std::vector<Stall> stalls) {
  std::sort(stalls.begin(), stalls.end(),
            [](const Stall& a, const Stall& b) { return a.start_ns < b.start_ns; });
  std::vector<Stall> merged;
  for (const Stall& stall : stalls) {
    if (!merged.empty() && stall.start_ns <= merged.back().end_ns) {
      merged.back().end_ns = std::max(merged.back().end_ns, stall.end_ns);
    } else {
      merged.push_back(stall);
    }
  }
  return merged;
}

double PerSecond(int64_t count, double seconds) { return static_cast<double>(count) / seconds; }

double RateAtLeast(const std::vector<Stall>& stalls, int64_t length_ns, double seconds) {
  return PerSecond(std::count_if(stalls.begin(), stalls.end(),
                                 [&](const Stall& stall) { return Length(stall) >= length_ns; }),
                   seconds);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"How long this machine stalls a running thread, per CPU and merged"};
  double seconds = 5;
  std::string cpu_list;
  int64_t min_gap_us = 200;
  int64_t threshold_us = 0;
  app.add_option("--seconds", seconds, "Probing time")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--cpus", cpu_list, "CPUs to probe, as a Linux CPU list (default: all allowed)");
  app.add_option("--min-gap-us", min_gap_us, "Shortest gap counted as a stall")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{10}, int64_t{1000000}));
  app.add_option("--threshold-us", threshold_us,
                 "Also print the merged stalls per second at least this long")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}));
  CLI11_PARSE(app, argc, argv);

  std::vector<int> cpus = rampart::AllowedCpus();
  if (!cpu_list.empty()) {
    auto parsed = rampart::ParseCpuList(cpu_list);
    rampart::Status allowed = parsed.ok() ? rampart::CheckAllowedCpus(*parsed) : parsed.status();
    if (!allowed.ok()) {
      std::fprintf(stderr, "--cpus: %s\n", allowed.ToString().c_str());
      return 1;
    }
    cpus = *parsed;
  }
  if (cpus.empty()) {
    std::fprintf(stderr, "no CPU to probe\n");
    return 1;
  }

  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(seconds));
  std::vector<std::vector<Stall>> per_cpu(cpus.size());
  std::atomic<bool> failed = false;
  {
    std::vector<std::jthread> threads;
    for (size_t i = 0; i < cpus.size(); ++i) {
      threads.emplace_back([&, i] { per_cpu[i] = Probe(cpus[i], end, min_gap_us * 1000, failed); });
    }
  }
  if (failed) return 1;

  std::vector<Stall> all;
  for (size_t i = 0; i < cpus.size(); ++i) {
    std::printf("cpu%d_stalled_ms_per_s=%.2f\n", cpus[i],
                static_cast<double>(TotalLength(per_cpu[i])) / 1e6 / seconds);
    std::printf("cpu%d_max_stall_us=%.0f\n", cpus[i],
                static_cast<double>(LongestLength(per_cpu[i])) / 1e3);
    all.insert(all.end(), per_cpu[i].begin(), per_cpu[i].end());
  }
  const std::vector<Stall> merged = Merge(std::move(all));
  std::printf("probe_seconds=%.1f\n", seconds);
  std::printf("stalled_ms_per_s=%.2f\n", static_cast<double>(TotalLength(merged)) / 1e6 / seconds);
  std::printf("max_stall_us=%.0f\n", static_cast<double>(LongestLength(merged)) / 1e3);
  for (int64_t length_us : {500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 10000}) {
    std::printf("stalls_per_s_ge_%ldus=%.2f\n", static_cast<long>(length_us),
                RateAtLeast(merged, length_us * 1000, seconds));
  }
  if (threshold_us > 0) {
    std::printf("stalls_per_s_ge_threshold=%.2f\n",
                RateAtLeast(merged, threshold_us * 1000, seconds));
  }
  return 0;
}
