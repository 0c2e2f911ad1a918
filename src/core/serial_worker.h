#pragma once

// SerialWorker: one owned thread that runs posted tasks in order, for slow work (loading models,
// reading the repository) that must not run on an I/O thread: a WorkerPool of one thread
// (core/worker_pool.h), with its Post and Stop. A task that throws is logged and the worker goes
// on with the next.

#include <cstddef>
#include <string_view>

#include "core/worker_pool.h"

namespace rampart {

class SerialWorker : public WorkerPool {
 public:
  // `name` names the thread (see core/thread_name.h); at most `max_queued` tasks wait behind
  // the one running (0: no bound).
  explicit SerialWorker(std::string_view name = "worker", size_t max_queued = 0)
      : WorkerPool(name, 1, max_queued) {}
};

}  // namespace rampart
