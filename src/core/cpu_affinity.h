#pragma once

// CPU placement for Rampart's threads (--instance-cpus, --http-cpus), in the spirit of Triton's
// host policy `cpu-cores`: model instance threads and HTTP I/O threads can be kept on separate
// CPUs, so network work (and the interrupts and softirqs it brings) does not land on the CPUs
// that compute. And the scheduling class of I/O threads (--http-sched-batch), and the nice value
// of a model's instance threads (its config's optimization.priority).

#include <string_view>
#include <vector>

#include "core/status.h"

namespace rampart {

// Parses a Linux CPU list such as "0-3,6" into ascending, distinct CPU numbers; "" is the empty
// list. Errors: InvalidArgument naming the part that is not a CPU number or range.
Result<std::vector<int>> ParseCpuList(std::string_view text);

// The CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> AllowedCpus();

// How many CPUs this process may run on (at least 1). Unlike std::thread::hardware_concurrency,
// which counts the machine's CPUs, it honours a cpuset or `taskset` that allows fewer (a
// container given two of a host's 64 CPUs gets 2).
int UsableCpuCount();

// OK when every CPU in `cpus` is one this process may run on. Errors: InvalidArgument naming the
// first that is not, and the allowed ones.
Status CheckAllowedCpus(const std::vector<int>& cpus);

// Restricts the calling thread to `cpus`; an empty list leaves it as it is. Errors: Internal
// with the system's reason.
Status PinThisThread(const std::vector<int>& cpus);

// Moves the calling thread to SCHED_BATCH (no privilege needed): the kernel treats it as
// throughput-bound, so its wake-ups do not preempt the thread running on the CPU it lands on
// (a model instance mid-batch, say); it runs on an idle CPU, or when that thread's slice ends.
// Its share of the CPU is unchanged. Errors: Internal with the system's reason.
Status UseBatchScheduling();

// The calling thread's nice value (-20, most favoured, to 19). On Linux the nice value belongs to
// a thread, not to the process; a new thread starts with its creator's.
int ThisThreadNice();

// Sets the calling thread's nice value, clamped to [-20, 19]. Lowering it below its current value
// needs root, CAP_SYS_NICE or a RLIMIT_NICE that allows it (systemd: LimitNICE=); raising it
// does not. Errors: PermissionDenied saying so; Internal with the system's reason otherwise.
Status SetThisThreadNice(int nice);

}  // namespace rampart
