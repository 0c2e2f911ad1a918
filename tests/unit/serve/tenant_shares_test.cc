#include "serve/tenant_shares.h"

#include <gtest/gtest.h>

#include <cmath>
#include <future>

#include "serve/scheduler.h"
#include "server_repository.h"
#include "testing/fake_clock.h"

namespace rampart::serve {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const SteadyTime kT0 = SteadyTime() + std::chrono::hours(1);

TEST(TenantSharesTest, ATenantOverItsShareIsRefusedAndTheWindowSlides) {
  TenantShares shares("simple", 2);  // two instances: 20 s of instance time per 10 s window
  shares.Set({{"acme", 0.5}});       // acme: 10 s of it
  EXPECT_TRUE(shares.Admit("acme", kT0).ok());
  shares.Charge("acme", ToNanos(seconds(6)), kT0);
  shares.Charge("acme", ToNanos(seconds(4)), kT0 + seconds(3));
  EXPECT_TRUE(shares.Admit("acme", kT0 + seconds(3)).ok());  // exactly its share: not over
  shares.Charge("acme", 1, kT0 + seconds(3));
  const Status refused = shares.Admit("acme", kT0 + seconds(3));
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(), "tenant 'acme' is over its 50% share of model 'simple'");
  // Others are not limited: a tenant without a share, and requests without a tenant.
  shares.Charge("globex", ToNanos(seconds(100)), kT0);
  EXPECT_TRUE(shares.Admit("globex", kT0 + seconds(3)).ok());
  // Ten seconds after kT0 its first 6 s leave the window.
  EXPECT_FALSE(shares.Admit("acme", kT0 + milliseconds(9999)).ok());
  EXPECT_TRUE(shares.Admit("acme", kT0 + seconds(10)).ok());
  // Twenty seconds on, nothing is left; a bucket reused for a later second starts from zero.
  shares.Charge("acme", ToNanos(seconds(9)), kT0 + seconds(20));
  EXPECT_TRUE(shares.Admit("acme", kT0 + seconds(20)).ok());
}

TEST(TenantSharesTest, SetKeepsTheUsageOfTenantsThatKeepAShare) {
  TenantShares shares("simple", 1);
  shares.Set({{"acme", 0.5}, {"globex", 0.5}});
  shares.Charge("acme", ToNanos(seconds(6)), kT0);
  shares.Charge("globex", ToNanos(seconds(6)), kT0);
  shares.Set({{"acme", 0.8}});
  EXPECT_TRUE(shares.Admit("acme", kT0).ok());  // 6 s of 8
  shares.Set({{"acme", 0.5}, {"globex", 0.5}});
  EXPECT_FALSE(shares.Admit("acme", kT0).ok());   // 6 s of 5, kept
  EXPECT_TRUE(shares.Admit("globex", kT0).ok());  // dropped with its share, counted anew
}

// An instance whose every execution takes `took` on the fake clock.
class TimedInstance final : public backend::ModelInstance {
 public:
  TimedInstance(testing::FakeClock& clock, std::chrono::nanoseconds took)
      : clock_(clock), took_(took) {}
  Result<backend::ExecutionResult> Execute(std::vector<tensor::Tensor>& inputs) override {
    clock_.Advance(took_);
    backend::ExecutionResult result;
    tensor::Tensor y = inputs.at(0);
    y.name = "y";
    result.outputs.push_back(std::move(y));
    return result;
  }

 private:
  testing::FakeClock& clock_;
  const std::chrono::nanoseconds took_;
};

class SchedulerSharesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::unique_ptr<backend::ModelInstance>> instances;
    instances.push_back(std::make_unique<TimedInstance>(clock_, seconds(3)));
    BatchPolicy policy;
    policy.queue_policies.push_back(QueuePolicy{});
    scheduler_ = std::make_unique<Scheduler>("simple", 1, std::move(policy), std::move(instances),
                                             stats_, clock_);
  }
  void TearDown() override { scheduler_->Stop(); }

  // Runs one request of `tenant` to its end.
  Status Run(std::string tenant) {
    auto request = std::make_unique<InferRequest>();
    request->model_name = "simple";
    request->tenant = std::move(tenant);
    request->arrival = clock_.Now();
    request->inputs.push_back(
        tensor::Tensor{"x", tensor::DataType::kFp32, {1}, std::string(4, '\0')});
    std::promise<Status> answered;
    scheduler_->Enqueue(std::move(request), 1, [&](Result<std::unique_ptr<InferResponse>> result) {
      answered.set_value(result.status());
    });
    return answered.get_future().get();
  }

  testing::FakeClock clock_;
  Statistics stats_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerSharesTest, ATenantOverItsShareIsRefusedAtAdmissionAndCountedAsRejected) {
  scheduler_->SetTenantShares({{"acme", 0.5}});  // 5 s of each 10 s on one instance
  EXPECT_TRUE(Run("acme").ok());                 // 3 s
  EXPECT_TRUE(Run("acme").ok());                 // 6 s: admitted at 3 s
  const Status refused = Run("acme");
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(), "tenant 'acme' is over its 50% share of model 'simple'");
  EXPECT_EQ(stats_.Snapshot().failures_by_reason[static_cast<int>(FailureReason::kRejected)], 1u);
  // Another tenant, and a request without a tenant, run meanwhile.
  EXPECT_TRUE(Run("globex").ok());
  EXPECT_TRUE(Run("").ok());
  EXPECT_EQ(stats_.Snapshot().execution_count, 4u);
  // Once acme's executions leave the window, it runs again.
  clock_.Advance(seconds(10));
  EXPECT_TRUE(Run("acme").ok());
  EXPECT_TRUE(Run("acme").ok());
  EXPECT_FALSE(Run("acme").ok());
  // Shares off: nothing is refused.
  scheduler_->SetTenantShares({});
  EXPECT_TRUE(Run("acme").ok());
}

TEST(InferenceServerSharesTest, SharesApplyToLoadedVersionsAndToThoseLoadedLater) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  for (const InstanceShare& bad :
       {InstanceShare{"add", "acme", 0}, InstanceShare{"add", "acme", 1.5},
        InstanceShare{"add", "acme", std::nan("")}, InstanceShare{"add", "", 0.5},
        InstanceShare{"", "acme", 0.5}}) {
    EXPECT_EQ(server.SetInstanceShares({bad}).code(), StatusCode::kInvalidArgument)
        << bad.model << " " << bad.tenant << " " << bad.share;
  }
  const Status twice = server.SetInstanceShares({{"add", "acme", 0.5}, {"add", "acme", 0.25}});
  EXPECT_EQ(twice.message(), "tenant 'acme' has two shares of model 'add'");
  // A share so small (10 ns per 10 s) that any execution passes it.
  ASSERT_TRUE(server.SetInstanceShares({{"add", "acme", 1e-9}}).ok());
  ASSERT_TRUE(server.LoadModel("add").ok());  // loaded after: its version has the shares
  auto infer = [&](std::string tenant) {
    auto request =
        Request({Int32Tensor("INPUT0", {1, 2}, {1, 2}), Int32Tensor("INPUT1", {1, 2}, {1, 1})});
    request->tenant = std::move(tenant);
    std::promise<Status> answered;
    server.Infer(std::move(request), [&](Result<std::unique_ptr<InferResponse>> result) {
      answered.set_value(result.status());
    });
    return answered.get_future().get();
  };
  EXPECT_TRUE(infer("acme").ok());
  EXPECT_EQ(infer("acme").code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(infer("globex").ok());
  EXPECT_TRUE(infer("").ok());
  ASSERT_TRUE(server.SetInstanceShares({}).ok());  // the loaded version's shares go too
  EXPECT_TRUE(infer("acme").ok());
  server.Shutdown(std::chrono::milliseconds(0));
}

}  // namespace
}  // namespace rampart::serve
