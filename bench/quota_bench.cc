// What quotas cost a request: QuotaLedger::Admit, Settle and the reservation's release, against
// an uncontended std::mutex lock/unlock measured in the same run (the ratio is what to compare
// across machines), and the tenants' shares on the scheduler's admission, off against on.
//
// Cases (each a request of a key whose key, principal and tenant all have rules, so every
// admission takes three subjects' counters and a concurrency slot):
//   baseline             std::mutex lock + unlock, one thread
//   no rule              Admit for an identity no rule limits (the ledger's floor)
//   1 thread             Admit + Settle + release
//   2 threads, same key  both threads on the same three subjects (every lock contended)
//   2 threads, own keys  own key and principal, one tenant (the tenant's shard contended)
// Then: Scheduler::Enqueue of a model that answers at once (direct execution), with no shares,
// and with a share for the request's tenant that it never passes.
//
// Usage: build/bench/quota_bench [seconds per case, default 1]

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "policy/quota.h"
#include "serve/scheduler.h"

namespace {

using rampart::policy::QuotaLedger;
using rampart::policy::QuotaLimits;
using rampart::policy::QuotaOptions;
using rampart::policy::QuotaRule;
using Clock = std::chrono::steady_clock;

double g_seconds = 1.0;

// Runs `op` on `threads` threads for g_seconds; nanoseconds per op per thread.
template <typename Op>
double NanosPerOp(int threads, Op op) {
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (!go.load()) {
      }
      uint64_t done = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 256; ++i) op(t);
        done += 256;
      }
      total += done;
    });
  }
  const auto started = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(g_seconds));
  stop = true;
  for (std::thread& worker : workers) worker.join();
  const double elapsed = std::chrono::duration<double, std::nano>(Clock::now() - started).count();
  return elapsed * threads / static_cast<double>(total.load());
}

rampart::identity::Identity Caller(const std::string& key, const std::string& principal) {
  rampart::identity::Identity identity;
  identity.method = rampart::identity::Method::kApiKey;
  identity.tenant = "acme";
  identity.principal = principal;
  identity.key_id = key;
  return identity;
}

void Print(const char* name, double nanos, double baseline) {
  std::printf("%-34s %9.1f ns/request  %6.1fx baseline\n", name, nanos, nanos / baseline);
}

// A model instance that answers at once (its input as its output).
class EchoInstance final : public rampart::backend::ModelInstance {
 public:
  rampart::Result<rampart::backend::ExecutionResult> Execute(
      std::vector<rampart::tensor::Tensor>& inputs) override {
    rampart::backend::ExecutionResult result;
    result.outputs.push_back(std::move(inputs.at(0)));
    return result;
  }
};

double EnqueueNanos(bool shares) {
  using namespace rampart::serve;
  Statistics statistics;
  std::vector<std::unique_ptr<rampart::backend::ModelInstance>> instances;
  instances.push_back(std::make_unique<EchoInstance>());
  BatchPolicy policy;
  policy.queue_policies.push_back(QueuePolicy{});
  // Direct execution: the request runs on the calling thread, so the loop measures admission,
  // execution and the answer without thread hand-offs.
  Scheduler scheduler("bench", 1, std::move(policy), std::move(instances), statistics,
                      rampart::Clock::Real(), std::chrono::milliseconds(10));
  if (shares) scheduler.SetTenantShares({{"acme", 1.0}});
  rampart::tensor::Tensor input{"x", rampart::tensor::DataType::kFp32, {1}, std::string(4, '\0')};
  auto enqueue = [&](int) {
    auto request = std::make_unique<InferRequest>();
    request->tenant = "acme";
    request->inputs.push_back(input);
    scheduler.Enqueue(std::move(request), 1,
                      [](rampart::Result<std::unique_ptr<InferResponse>>) {});
  };
  for (int i = 0; i < 1000; ++i) enqueue(0);  // measured fast: direct execution from here on
  const double nanos = NanosPerOp(1, enqueue);
  scheduler.Stop();
  return nanos;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_seconds = std::atof(argv[1]);
  std::mutex mutex;
  const double baseline = NanosPerOp(1, [&](int) {
    mutex.lock();
    mutex.unlock();
  });
  std::printf("%-34s %9.1f ns/op\n", "baseline: std::mutex lock+unlock", baseline);
  std::mutex contended;
  const double contended_baseline = NanosPerOp(2, [&](int) {
    contended.lock();
    contended.unlock();
  });
  std::printf("%-34s %9.1f ns/op  %6.1fx baseline\n", "std::mutex, 2 threads, one mutex",
              contended_baseline, contended_baseline / baseline);

  const int64_t kMany = int64_t{1} << 60;  // never reached: every admission succeeds
  QuotaOptions options;
  options.rules = {QuotaRule{"key", "*", "*",
                             QuotaLimits{.requests_per_minute = kMany, .tokens_per_minute = kMany}},
                   QuotaRule{"principal", "*", "*", QuotaLimits{.requests_per_minute = kMany}},
                   QuotaRule{"tenant", "*", "*",
                             QuotaLimits{.requests_per_minute = kMany,
                                         .tokens_per_minute = kMany,
                                         .concurrent_requests = 1 << 20,
                                         .tokens_per_day = kMany}}};
  QuotaLedger ledger(options, nullptr);
  const rampart::identity::Identity unlimited = [] {
    rampart::identity::Identity identity;
    identity.tenant = "acme";
    return identity;
  }();
  QuotaLedger empty(QuotaOptions{}, nullptr);
  Print("no rule", NanosPerOp(1, [&](int) { (void)empty.Admit(unlimited, 100); }), baseline);

  const std::vector<rampart::identity::Identity> callers = {Caller("rk_live_AAAAAAAAAAAA", "alice"),
                                                            Caller("rk_live_BBBBBBBBBBBB", "bob")};
  auto admit_settle = [&](const rampart::identity::Identity& caller) {
    QuotaLedger::Admission admission = ledger.Admit(caller, 100);
    if (!admission.admitted()) std::abort();
    admission.reservation.Settle(42);
  };
  Print("Admit+Settle, 1 thread", NanosPerOp(1, [&](int) { admit_settle(callers[0]); }), baseline);
  Print("Admit+Settle, 2 threads, same key", NanosPerOp(2, [&](int) { admit_settle(callers[0]); }),
        baseline);
  Print("Admit+Settle, 2 threads, own keys",
        NanosPerOp(2, [&](int t) { admit_settle(callers[static_cast<size_t>(t)]); }), baseline);

  const double off = EnqueueNanos(false);
  const double on = EnqueueNanos(true);
  std::printf("%-34s %9.1f ns/request\n", "Enqueue (direct), shares off", off);
  std::printf("%-34s %9.1f ns/request  %+.1f ns\n", "Enqueue (direct), shares on", on, on - off);
  return 0;
}
