// InferenceServer over the fake `add` backend: readiness, the repository index, control modes,
// poll mode, canaries, hot reload, answers in their config shapes, and shutdown (ensembles:
// server_ensemble_test.cc).

#include "serve/server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>

#include "server_repository.h"
#include "testing/eventually.h"

namespace rampart::serve {
namespace {

TEST(InferenceServer, UnknownModelAndVersionUseTritonWording) {
  backend::BackendRegistry backends;
  InferenceServer server(ServerOptions{}, backends);
  Status unknown = server.GetModel("nope", kLatestVersion).status();
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.message(), "Request for unknown model: 'nope' is not found");
  Status done;
  server.Infer(Request({}),
               [&done](Result<std::unique_ptr<InferResponse>> r) { done = r.status(); });
  EXPECT_EQ(done.code(), StatusCode::kNotFound);
}

TEST(InferenceServer, StrictReadinessNeedsEveryModelButUnloadedOnes) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/true), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  EXPECT_TRUE(server.IsReady());  // explicit mode, nothing asked for yet
  ASSERT_TRUE(server.LoadModel("add").ok());
  EXPECT_TRUE(server.IsReady());
  ASSERT_TRUE(server.UnloadModel("add").ok());
  EXPECT_TRUE(server.IsReady());  // unloaded on request: not counted, as in Triton
  EXPECT_FALSE(server.LoadModel("broken").ok());
  EXPECT_FALSE(server.IsReady());
  ASSERT_TRUE(server.LoadModel("add").ok());
  EXPECT_FALSE(server.IsReady());  // `broken` still failed
  server.Shutdown(std::chrono::milliseconds(0));
  EXPECT_FALSE(server.IsReady());
}

// Clients find the models they may load in the index: Triton lists those no load has tried by
// name only, and so does Rampart; load and unload outside explicit mode are Unavailable (503).
TEST(InferenceServer, TheIndexListsModelsNoLoadHasTriedByNameOnly) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  std::vector<ModelIndexEntry> index = server.RepositoryIndex();
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0].name, "add");
  EXPECT_EQ(index[0].state, "");
  EXPECT_EQ(index[1].name, "broken");
  EXPECT_EQ(index[1].state, "");
  ASSERT_TRUE(server.LoadModel("add").ok());
  index = server.RepositoryIndex();
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0].name, "add");
  EXPECT_EQ(index[0].version, "1");
  EXPECT_EQ(index[0].state, "READY");
  EXPECT_EQ(index[1].name, "broken");
  EXPECT_EQ(index[1].state, "");

  InferenceServer fixed(ServerOptions{.repository = repository.path()}, backends);
  EXPECT_EQ(fixed.LoadModel("add").code(), StatusCode::kUnavailable);
  EXPECT_EQ(fixed.UnloadModel("add").code(), StatusCode::kUnavailable);

  // Once a shutdown began, loads (which can take long) are refused, so the exit keeps its timeout.
  server.Shutdown(std::chrono::milliseconds(0));
  EXPECT_EQ(server.LoadModel("add").message(), "the server is shutting down");
  EXPECT_EQ(server.UnloadModel("add").message(), "the server is shutting down");
}

// Triton answers an unload of a model that is not loaded (never loaded, unloaded already, or
// not in the repository at all) with success, and does nothing.
TEST(InferenceServer, UnloadingAModelThatIsNotLoadedSucceedsAndChangesNothing) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/true), backends);
  EXPECT_TRUE(server.UnloadModel("add").ok());
  EXPECT_TRUE(server.UnloadModel("no_such_model").ok());
  std::vector<ModelIndexEntry> index = server.RepositoryIndex();
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0].state, "");  // still listed by name only: no load has tried it
  ASSERT_TRUE(server.LoadModel("add").ok());
  ASSERT_TRUE(server.UnloadModel("add").ok());
  EXPECT_TRUE(server.UnloadModel("add", /*unload_dependents=*/true).ok());
  index = server.RepositoryIndex();
  EXPECT_EQ(index[0].reason, "unloaded");
  EXPECT_TRUE(server.IsReady());
  server.Shutdown(std::chrono::milliseconds(0));
}

// Triton reloads beside the serving versions and, when the reload fails, keeps them as they
// were, in the index too: no row of its own for the failure. A new version that failed shows as
// that version, UNAVAILABLE with its reason (and strict readiness counts it), as in Triton.
TEST(InferenceServer, AFailedReloadLeavesTheIndexAsItWas) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/true), backends);
  ASSERT_TRUE(server.LoadModel("add").ok());
  const auto add_rows = [&server] {
    std::vector<ModelIndexEntry> rows;
    for (ModelIndexEntry& entry : server.RepositoryIndex()) {
      if (entry.name == "add") rows.push_back(std::move(entry));
    }
    return rows;
  };
  WriteModel(repository.path(), "add", "name: \"add\" max_batch_size: eight");
  EXPECT_FALSE(server.LoadModel("add").ok());
  std::vector<ModelIndexEntry> rows = add_rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].version, "1");
  EXPECT_EQ(rows[0].state, "READY");
  EXPECT_EQ(rows[0].reason, "");
  EXPECT_TRUE(server.IsReady());

  // Version 2 needs a warm-up file only version 1 has.
  WriteModel(repository.path(), "add",
             std::string(kAddConfig) +
                 "version_policy { all {} } model_warmup [ { name: \"w\" batch_size: 1 inputs "
                 "[ { key: \"INPUT0\" value { data_type: TYPE_INT32 dims: [ 1 ] "
                 "input_data_file: \"one\" } }, { key: \"INPUT1\" value { data_type: "
                 "TYPE_INT32 dims: [ 1 ] zero_data: true } } ] } ]");
  std::filesystem::create_directories(repository.path() / "add" / "1" / "warmup");
  std::ofstream(repository.path() / "add" / "1" / "warmup" / "one") << std::string(4, '\0');
  std::filesystem::create_directories(repository.path() / "add" / "2");
  EXPECT_FALSE(server.LoadModel("add").ok());
  rows = add_rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].version, "1");
  EXPECT_EQ(rows[0].state, "READY");
  EXPECT_EQ(rows[1].version, "2");
  EXPECT_EQ(rows[1].state, "UNAVAILABLE");
  EXPECT_NE(rows[1].reason.find("model_warmup 'w'"), std::string::npos) << rows[1].reason;
  EXPECT_FALSE(server.IsReady());
  EXPECT_TRUE(server.GetModel("add", 1).ok());  // still serving
  server.Shutdown(std::chrono::milliseconds(0));
}

// Every instance of every model shares the cores: a model loaded first is budgeted for those the
// start-up loads after it too, and one loaded later for those already serving.
TEST(InferenceServer, TheCoresAreSharedAmongEveryModelsInstances) {
  RepositoryDir repository;
  std::filesystem::remove_all(repository.path() / "broken");
  std::string pair = kAddConfig;
  pair.replace(pair.find("name: \"add\""), 11, "name: \"pair\"");
  pair += "instance_group [ { count: 2 kind: KIND_CPU } ]\n";
  WriteModel(repository.path(), "pair", pair);
  std::string late = kAddConfig;
  late.replace(late.find("name: \"add\""), 11, "name: \"late\"");
  WriteModel(repository.path(), "late", late);
  const backend::BackendRegistry backends = AddBackends();
  ServerOptions options = ExplicitMode(repository.path(), /*strict=*/false);
  options.startup_models = {"add", "pair"};
  options.instance_cpus.assign(12, 0);  // twelve cores' worth of budget (all on CPU 0)
  InstanceThreadBudgets().clear();
  InferenceServer server(options, backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  // 12 cores for add's one instance and pair's two, from the first load on.
  EXPECT_EQ(InstanceThreadBudgets()["add"], (std::vector<int>{4}));
  EXPECT_EQ(InstanceThreadBudgets()["pair"], (std::vector<int>{4, 4}));
  ASSERT_TRUE(server.LoadModel("late").ok());
  EXPECT_EQ(InstanceThreadBudgets()["late"], (std::vector<int>{3}));  // 12 for four now
}

TEST(InferenceServer, WithoutStrictReadinessAFailedModelLeavesTheServerReady) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  EXPECT_FALSE(server.LoadModel("broken").ok());
  EXPECT_TRUE(server.IsReady());
  server.Shutdown(std::chrono::milliseconds(0));
  EXPECT_FALSE(server.IsReady());
}

ServerOptions PollMode(const std::filesystem::path& repository) {
  ServerOptions options;
  options.repository = repository;
  options.control_mode = ModelControlMode::kPoll;
  options.strict_readiness = true;
  options.poll_interval = std::chrono::hours(1);  // the test calls Poll itself
  return options;
}

TEST(InferenceServer, PollForgetsAModelThatLeftWithoutEverLoading) {
  RepositoryDir repository;  // `add` and `broken`
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(PollMode(repository.path()), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  EXPECT_FALSE(server.IsReady());  // `broken` failed to load
  std::filesystem::remove_all(repository.path() / "broken");
  server.Poll();
  EXPECT_TRUE(server.IsReady());
  for (const ModelIndexEntry& entry : server.RepositoryIndex()) EXPECT_NE(entry.name, "broken");
  server.Shutdown(std::chrono::milliseconds(0));
}

// A backend whose instances never load; counts the attempts.
class FailingBackend final : public backend::Backend {
 public:
  explicit FailingBackend(std::atomic<int>& attempts) : attempts_(attempts) {}
  std::string_view name() const override { return "failing"; }
  Result<std::unique_ptr<backend::ModelInstance>> CreateInstance(
      const backend::InstanceSpec&) override {
    ++attempts_;
    return Internal("this backend never loads");
  }

 private:
  std::atomic<int>& attempts_;
};

// A model that failed at start-up and whose files did not change is not "changed; reloading" on
// the first poll (its start-up fingerprint used to be left out), only once its files change.
TEST(InferenceServer, PollDoesNotRetryAFailedModelWhoseFilesDidNotChange) {
  RepositoryDir repository;
  std::filesystem::remove_all(repository.path() / "broken");
  std::string config = kAddConfig;
  config.replace(config.find("add"), 3, "fails");
  config.replace(config.find("fake"), 4, "failing");
  WriteModel(repository.path(), "fails", config);
  std::atomic<int> attempts = 0;
  backend::BackendRegistry backends = AddBackends();
  backends.Register(std::make_unique<FailingBackend>(attempts));
  InferenceServer server(PollMode(repository.path()), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  EXPECT_EQ(attempts, 1);
  server.Poll();
  server.Poll();
  EXPECT_EQ(attempts, 1);
  EXPECT_TRUE(server.GetModel("add", kLatestVersion).ok());
  WriteModel(repository.path(), "fails", config + "\n# changed\n");
  server.Poll();  // seen once
  server.Poll();  // settled: retried
  EXPECT_EQ(attempts, 2);
  server.Shutdown(std::chrono::milliseconds(0));
}

TEST(InferenceServer, PollLoadsAnEnsembleAfterTheStepModelThatAppearedWithIt) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  std::filesystem::remove_all(repository.path() / "broken");
  std::filesystem::remove_all(repository.path() / "add");
  InferenceServer server(PollMode(repository.path()), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  // "a_pipe" sorts before its step model "add".
  WriteModel(repository.path(), "a_pipe", ChainConfig("a_pipe", 1));
  WriteModel(repository.path(), "add", kAddConfig);
  server.Poll();  // seen once
  server.Poll();  // settled: loaded
  EXPECT_TRUE(server.GetModel("add", kLatestVersion).ok());
  EXPECT_TRUE(server.GetModel("a_pipe", kLatestVersion).ok());
  EXPECT_TRUE(server.IsReady());
  server.Shutdown(std::chrono::milliseconds(0));
}

TEST(InferenceServer, PollRetriesAnEnsembleOnceItsStepModelIsMended) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  std::filesystem::remove_all(repository.path() / "broken");
  WriteModel(repository.path(), "add", "name: \"add\" max_batch_size: eight");
  WriteModel(repository.path(), "pipe", ChainConfig("pipe", 1));
  InferenceServer server(PollMode(repository.path()), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  EXPECT_FALSE(server.GetModel("pipe", kLatestVersion).ok());  // its step model failed
  WriteModel(repository.path(), "add", kAddConfig);            // mended; `pipe` unchanged
  server.Poll();
  server.Poll();
  EXPECT_TRUE(server.GetModel("add", kLatestVersion).ok());
  EXPECT_TRUE(server.GetModel("pipe", kLatestVersion).ok());
  EXPECT_TRUE(server.IsReady());
  server.Shutdown(std::chrono::milliseconds(0));
}

TEST(InferenceServer, PollUnloadsAnEnsembleWhoseStepModelLeft) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  std::filesystem::remove_all(repository.path() / "broken");
  WriteModel(repository.path(), "pipe", ChainConfig("pipe", 1));
  InferenceServer server(PollMode(repository.path()), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  ASSERT_TRUE(server.GetModel("pipe", kLatestVersion).ok());
  std::filesystem::remove_all(repository.path() / "add");
  server.Poll();
  EXPECT_FALSE(server.GetModel("add", kLatestVersion).ok());
  EXPECT_FALSE(server.GetModel("pipe", kLatestVersion).ok());  // it could not run
  server.Shutdown(std::chrono::milliseconds(0));
}

// `add` loaded in explicit mode, with one request executing on its one instance (held at the
// gate) and one queued behind it: what a shutdown past its deadline finds.
class HeldAndQueued {
 public:
  HeldAndQueued() {
    EXPECT_TRUE(server_.LoadModel("add").ok());
    Gate().Close();
    Send(kHold, running_);
    Gate().WaitForWaiting(1);  // the one instance is busy
    Send(1, queued_);
  }
  InferenceServer& server() { return server_; }
  const RepositoryDir& repository() const { return repository_; }

  // The queued request must be answered now, not run after the deadline; the execution under
  // way still finishes. Opens the gate either way.
  void ExpectQueuedRefusedAndRunningDone() {
    auto abandoned = queued_.get_future();
    const std::future_status answered = abandoned.wait_for(std::chrono::seconds(10));
    Gate().Open();
    ASSERT_EQ(answered, std::future_status::ready);
    Result<std::unique_ptr<InferResponse>> refused = abandoned.get();
    EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(refused.status().message(), "the server is shutting down");
    EXPECT_TRUE(running_.get_future().get().ok());
  }

 private:
  void Send(int32_t first, std::promise<Result<std::unique_ptr<InferResponse>>>& promise) {
    server_.Infer(
        Request({Int32Tensor("INPUT0", {1, 2}, {first, 1}), Int32Tensor("INPUT1", {1, 2}, {1, 1})}),
        [&promise](Result<std::unique_ptr<InferResponse>> result) {
          promise.set_value(std::move(result));
        });
  }

  RepositoryDir repository_;
  backend::BackendRegistry backends_ = AddBackends();
  // Before the server, which may still answer them as it goes.
  std::promise<Result<std::unique_ptr<InferResponse>>> running_;
  std::promise<Result<std::unique_ptr<InferResponse>>> queued_;
  InferenceServer server_{ExplicitMode(repository_.path(), /*strict=*/false), backends_};
};

// Serves `add` versions 1 and 2 and starts a canary from 1 to 2 (the default stages and limits).
void StartCanaryOnAdd(InferenceServer& server, const RepositoryDir& repository) {
  std::filesystem::create_directories(repository.path() / "add" / "2");
  WriteModel(repository.path(), "add", std::string(kAddConfig) + "version_policy: { all { } }");
  ASSERT_TRUE(server.LoadModel("add").ok());
  CanaryPolicy policy;
  policy.baseline = 1;
  policy.candidate = 2;
  ASSERT_TRUE(server.StartCanary("add", policy).ok());
}

TEST(InferenceServer, ACanaryDoesNotCountRequestsTheirClientsGaveUpOn) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_NO_FATAL_FAILURE(StartCanaryOnAdd(server, repository));
  // 5 % of 100 requests reach the candidate: 5 failures would roll it back (0.5 % of 200).
  auto gone = std::make_shared<std::atomic<bool>>(true);
  for (int i = 0; i < 100; ++i) {
    std::promise<Result<std::unique_ptr<InferResponse>>> answer;
    auto request =
        Request({Int32Tensor("INPUT0", {1, 2}, {1, 2}), Int32Tensor("INPUT1", {1, 2}, {1, 1})});
    request->cancelled = gone;  // its client has gone away
    server.Infer(std::move(request), [&answer](Result<std::unique_ptr<InferResponse>> result) {
      answer.set_value(std::move(result));
    });
    EXPECT_EQ(answer.get_future().get().status().code(), StatusCode::kCancelled);
  }
  Result<CanaryStatus> status = server.GetCanary("add");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state, CanaryState::kRunning) << status->last_decision;
  EXPECT_EQ(status->candidate_failures, 0u);
  server.Shutdown(std::chrono::milliseconds(0));
}

TEST(InferenceServer, AShutdownPastItsDeadlineAnswersWhatIsStillQueued) {
  HeldAndQueued held;
  EXPECT_EQ(held.server().Shutdown(std::chrono::milliseconds(0)), 2);
  held.ExpectQueuedRefusedAndRunningDone();
}

TEST(InferenceServer, ACanaryEndsWhenItsBaselineIsNoLongerLoaded) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_NO_FATAL_FAILURE(StartCanaryOnAdd(server, repository));
  // A reload that serves only version 2: requests the canary sent to 1 would fail NotFound.
  WriteModel(repository.path(), "add", kAddConfig);
  ASSERT_TRUE(server.LoadModel("add").ok());
  EXPECT_EQ(server.GetCanary("add").status().code(), StatusCode::kNotFound);
  for (int i = 0; i < 50; ++i) {
    std::promise<Result<std::unique_ptr<InferResponse>>> answer;
    server.Infer(
        Request({Int32Tensor("INPUT0", {1, 2}, {1, 2}), Int32Tensor("INPUT1", {1, 2}, {1, 1})}),
        [&answer](Result<std::unique_ptr<InferResponse>> result) {
          answer.set_value(std::move(result));
        });
    ASSERT_TRUE(answer.get_future().get().ok());
  }
  server.Shutdown(std::chrono::milliseconds(0));
}

// A request that looked a version up before a reload replaced it, and whose thread was then held
// up past the old version's buffer window, still finds that version working; the version stops
// once the request has let it go.
TEST(InferenceServer, AReplacedVersionStopsOnlyOnceNoRequestHoldsIt) {
  RepositoryDir repository;
  std::string config = kAddConfig;
  config += "version_policy: { all {} }\n";
  WriteModel(repository.path(), "add", config);
  std::filesystem::create_directories(repository.path() / "add" / "2");
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_TRUE(server.LoadModel("add").ok());
  // Version 1 as a request has it between its lookup and its queue.
  Result<std::shared_ptr<ModelVersion>> held = server.GetModel("add", 1);
  ASSERT_TRUE(held.ok());

  config.replace(config.find("max_batch_size: 4"), 17, "max_batch_size: 8");
  WriteModel(repository.path(), "add", config);
  ASSERT_TRUE(server.LoadModel("add").ok());  // both versions replaced, with one buffer window
  // Version 2 goes when the window has passed; version 1, considered in the same pass, stays.
  ASSERT_TRUE(testing::Eventually([&] { return server.RetiringVersions() < 2; }));
  EXPECT_EQ(server.RetiringVersions(), 1u);

  auto request =
      Request({Int32Tensor("INPUT0", {1, 2}, {1, 2}), Int32Tensor("INPUT1", {1, 2}, {10, 20})});
  ASSERT_TRUE((*held)->Validate(*request).ok());
  std::promise<Result<std::unique_ptr<InferResponse>>> answered;
  (*held)->Enqueue(std::move(request), [&answered](Result<std::unique_ptr<InferResponse>> result) {
    answered.set_value(std::move(result));
  });
  Result<std::unique_ptr<InferResponse>> answer = answered.get_future().get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  const auto* sum = reinterpret_cast<const int32_t*>((*answer)->outputs[0].data.data());
  EXPECT_EQ(sum[0], 11);
  EXPECT_EQ(sum[1], 22);

  held = std::shared_ptr<ModelVersion>();  // the request lets it go
  EXPECT_TRUE(testing::Eventually([&] { return server.RetiringVersions() == 0; }));
}

TEST(InferenceServer, AShutdownPastItsDeadlineAlsoAnswersWhatAReplacedVersionHolds) {
  HeldAndQueued held;
  std::string changed = kAddConfig;  // a larger max_batch_size: a new version is built
  changed.replace(changed.find("max_batch_size: 4"), 17, "max_batch_size: 8");
  WriteModel(held.repository().path(), "add", changed);
  // The old version now retires, still holding both requests.
  ASSERT_TRUE(held.server().LoadModel("add").ok());
  EXPECT_EQ(held.server().Shutdown(std::chrono::milliseconds(0)), 2);
  held.ExpectQueuedRefusedAndRunningDone();
}

// Triton's InferenceResponse::Output::Reshape, through the server: an output whose config has a
// reshape is answered in its dims (the model returns [b, n]; the answer is [b, 1, n]).
TEST(InferenceServer, OutputsAreAnsweredInTheirConfigDims) {
  RepositoryDir repository;
  std::string config = kAddConfig;
  const std::string plain = "{ name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ -1 ] }";
  config.replace(config.find(plain), plain.size(),
                 "{ name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 1, -1 ] "
                 "reshape { shape: [ -1 ] } }");
  WriteModel(repository.path(), "add", config);
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_TRUE(server.LoadModel("add").ok());
  std::promise<Result<std::unique_ptr<InferResponse>>> answer;
  server.Infer(Request({Int32Tensor("INPUT0", {2, 3}, {1, 2, 3, 4, 5, 6}),
                        Int32Tensor("INPUT1", {2, 3}, {1, 1, 1, 1, 1, 1})}),
               [&answer](Result<std::unique_ptr<InferResponse>> result) {
                 answer.set_value(std::move(result));
               });
  Result<std::unique_ptr<InferResponse>> result = answer.get_future().get();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ((*result)->outputs[0].name, "OUTPUT0");
  EXPECT_EQ((*result)->outputs[0].shape, (tensor::Shape{2, 1, 3}));
  EXPECT_EQ((*result)->outputs[1].shape, (tensor::Shape{2, 3}));
  server.Shutdown(std::chrono::milliseconds(0));
}

// Triton's PolicyQueue: a request's timeout only shortens a default; without one it is ignored,
// and a request waiting behind a busy instance longer than it asked is still served.
TEST(InferenceServer, ARequestTimeoutWithoutADefaultIsIgnored) {
  RepositoryDir repository;
  std::string config = kAddConfig;
  config.replace(config.find("max_batch_size: 4"), 17, "max_batch_size: 1");
  config += "dynamic_batching { default_queue_policy { allow_timeout_override: true } }\n";
  WriteModel(repository.path(), "add", config);
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_TRUE(server.LoadModel("add").ok());
  const auto send = [&](int32_t first, uint64_t timeout_us, std::promise<Status>& answer) {
    auto request =
        Request({Int32Tensor("INPUT0", {1, 2}, {first, 1}), Int32Tensor("INPUT1", {1, 2}, {1, 1})});
    request->timeout_us = timeout_us;
    server.Infer(std::move(request), [&answer](Result<std::unique_ptr<InferResponse>> result) {
      answer.set_value(result.status());
    });
  };
  std::promise<Status> held;
  std::promise<Status> waiting;
  Gate().Close();
  send(kHold, 0, held);
  Gate().WaitForWaiting(1);
  send(1, /*timeout_us=*/1, waiting);
  // Past its 1 µs: with the timeout applied, the queue's timer would have answered it by now.
  std::future<Status> waited = waiting.get_future();
  EXPECT_EQ(waited.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  Gate().Open();
  EXPECT_TRUE(held.get_future().get().ok());
  EXPECT_TRUE(waited.get().ok());
  server.Shutdown(std::chrono::milliseconds(0));
}

}  // namespace
}  // namespace rampart::serve
