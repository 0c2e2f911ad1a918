// KServeHttp under access control: a request's quota reservation is held until it is answered,
// also for the routes whose work runs off the I/O thread (repository index, load and unload).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

#include "api/kserve_http.h"
#include "backend/backend.h"
#include "net/http_connection.h"
#include "testing/access_fixture.h"
#include "testing/recording_connection.h"

namespace rampart::api {
namespace {

using testing::RecordingConnection;

// A backend whose instances take until the test releases them to load, and then fail.
class HeldBackend final : public backend::Backend {
 public:
  std::string_view name() const override { return "held"; }
  Result<std::unique_ptr<backend::ModelInstance>> CreateInstance(
      const backend::InstanceSpec&) override {
    entered_.set_value();
    released_.wait();
    return Internal("held: no instance");
  }
  std::future<void> entered() { return entered_.get_future(); }
  void Release() {
    std::call_once(released_once_, [this] { release_.set_value(); });
  }

 private:
  std::once_flag released_once_;
  std::promise<void> entered_;
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

constexpr std::string_view kAnalystsControl = R"(
roles:
  - name: analyst
rules:
  - id: analysts-control
    effect: permit
    principal: {role: analyst}
    action: [server:read, repository:read, model:load, model:unload]
)";

class KServeHttpAccessTest : public ::testing::Test {
 protected:
  KServeHttpAccessTest() : fixture_(kAnalystsControl) {}

  void SetUp() override {
    // alice (the analyst key) may have one request in flight.
    ASSERT_TRUE(fixture_.control()
                    .Reload(std::vector<policy::QuotaRule>{{.scope = "principal",
                                                            .tenant = "acme",
                                                            .name = "alice",
                                                            .limits = {.concurrent_requests = 1}}})
                    .ok());
    repository_ = std::filesystem::path(::testing::TempDir()) /
                  ("rampart_kserve_http_access_" +
                   std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(repository_ / "slow" / "1");
    std::ofstream(repository_ / "slow" / "config.pbtxt") << R"(backend: "held"
max_batch_size: 0
input [{ name: "IN", data_type: TYPE_INT32, dims: [1] }]
output [{ name: "OUT", data_type: TYPE_INT32, dims: [1] }]
)";
    auto backend = std::make_unique<HeldBackend>();
    backend_ = backend.get();
    backends_.Register(std::move(backend));
    serve::ServerOptions options;
    options.repository = repository_;
    options.control_mode = serve::ModelControlMode::kExplicit;
    server_ = std::make_unique<serve::InferenceServer>(options, backends_);
    KServeHttpOptions http_options;
    http_options.access = &fixture_.control();
    http_ = std::make_unique<KServeHttp>(*server_, http_options);
  }
  void TearDown() override {
    backend_->Release();  // a failed expectation must not leave the control thread waiting
    http_->Shutdown();
    std::filesystem::remove_all(repository_);
  }

  // Hands the request to the API and returns the answer to come.
  std::future<net::HttpResponse> Start(std::string method, std::string target) {
    net::HttpRequest request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.peer = std::make_shared<Peer>(Peer{.address = "10.1.1.1"});
    request.headers.emplace_back("x-api-key", fixture_.analyst_key());
    auto connection = std::make_shared<RecordingConnection>();
    std::future<net::HttpResponse> answer = connection->answer();
    http_->Handle(std::move(request), net::Responder(connection));
    return answer;
  }
  net::HttpResponse Send(std::string method, std::string target) {
    std::future<net::HttpResponse> answer = Start(std::move(method), std::move(target));
    EXPECT_EQ(answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return answer.get();
  }

  testing::AccessFixture fixture_;
  std::filesystem::path repository_;
  backend::BackendRegistry backends_;
  HeldBackend* backend_ = nullptr;
  std::unique_ptr<serve::InferenceServer> server_;
  std::unique_ptr<KServeHttp> http_;
};

TEST_F(KServeHttpAccessTest, ALoadHoldsItsConcurrencySlotUntilItIsAnswered) {
  EXPECT_EQ(Send("GET", "/v2").status, 200);
  std::future<void> entered = backend_->entered();
  std::future<net::HttpResponse> load = Start("POST", "/v2/repository/models/slow/load");
  if (entered.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    FAIL() << "the load never reached the backend: " << load.get().body;
  }

  // The load is queued and running on the control thread: alice's one slot is still taken.
  net::HttpResponse meanwhile = Send("GET", "/v2");
  EXPECT_EQ(meanwhile.status, 429) << meanwhile.body;

  backend_->Release();
  ASSERT_EQ(load.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(load.get().status, 200);  // the held backend fails the load
  EXPECT_EQ(Send("GET", "/v2").status, 200);
  EXPECT_EQ(Send("POST", "/v2/repository/index").status, 200);
  EXPECT_EQ(Send("GET", "/v2").status, 200);  // the index gave its slot back too
}

}  // namespace
}  // namespace rampart::api
