#include "core/cpu_affinity.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace rampart {
namespace {

bool ParseCpu(std::string_view text, int& cpu) {
  const char* end = text.data() + text.size();
  const auto [parsed, error] = std::from_chars(text.data(), end, cpu);
  return error == std::errc() && parsed == end && cpu >= 0 && cpu < CPU_SETSIZE;
}

}  // namespace

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t dash = part.find('-');
    int first = 0;
    int last = 0;
    const bool ok = dash == std::string_view::npos
                        ? ParseCpu(part, first) && ParseCpu(part, last)
                        : ParseCpu(part.substr(0, dash), first) &&
                              ParseCpu(part.substr(dash + 1), last) && first <= last;
    if (!ok) {
      return InvalidArgument("'{}' is not a CPU number or range (a list looks like 0-3,6)", part);
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

int UsableCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

Status CheckAllowedCpus(const std::vector<int>& cpus) {
  const std::vector<int> allowed = AllowedCpus();
  for (int cpu : cpus) {
    if (!std::binary_search(allowed.begin(), allowed.end(), cpu)) {
      return InvalidArgument("CPU {} is not one this process may run on ({})", cpu,
                             fmt::join(allowed, ","));
    }
  }
  return Status::Ok();
}

Status PinThisThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return Status::Ok();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return Internal("cannot restrict a thread to CPUs {}: {}", fmt::join(cpus, ","),
                    std::strerror(errno));
  }
  return Status::Ok();
}

Status UseBatchScheduling() {
  const sched_param param{};  // SCHED_BATCH takes priority 0; the nice value is kept
  if (sched_setscheduler(0, SCHED_BATCH, &param) != 0) {
    return Internal("cannot move a thread to SCHED_BATCH: {}", std::strerror(errno));
  }
  return Status::Ok();
}

int ThisThreadNice() {
  errno = 0;  // -1 is a valid nice value; only errno tells an error apart
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  return errno == 0 ? nice : 0;
}

Status SetThisThreadNice(int nice) {
  nice = std::clamp(nice, -20, 19);
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice) == 0) return Status::Ok();
  const int error = errno;  // ThisThreadNice() below resets errno
  if (error == EACCES || error == EPERM) {
    return PermissionDenied(
        "cannot set a thread's nice value to {} (from {}): {}; a higher priority needs root, "
        "CAP_SYS_NICE or a RLIMIT_NICE that allows it (systemd: LimitNICE={})",
        nice, ThisThreadNice(), std::strerror(error), nice);
  }
  return Internal("cannot set a thread's nice value to {}: {}", nice, std::strerror(error));
}

}  // namespace rampart
