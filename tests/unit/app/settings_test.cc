#include "app/settings.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace rampart::app {
namespace {

std::string WriteTemp(const std::string& text) {
  const auto path =
      std::filesystem::temp_directory_path() /
      ("rampart_settings_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(Settings, YamlOverridesOnlyTheKeysItNames) {
  ServeSettings settings;
  const std::string path = WriteTemp(
      "server:\n  model_repository: /models\n  load_models: [a, b]\n  strict_readiness: false\n"
      "http:\n  port: 9000\n  max_input_size: 1024\n  sched_batch: false\n");
  ASSERT_TRUE(ApplyYamlFile(path, settings).ok());
  EXPECT_EQ(settings.model_repository, "/models");
  EXPECT_FALSE(settings.strict_readiness);
  EXPECT_EQ(settings.load_models, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(settings.http_port, 9000);
  EXPECT_EQ(settings.http_max_input_size, 1024u);
  EXPECT_FALSE(settings.http_sched_batch);
  EXPECT_EQ(settings.http_address, "0.0.0.0");  // untouched default
  std::filesystem::remove(path);
}

// Clients that check the server metadata's name for "triton" can be served.
TEST(Settings, TheServerNameIsRampartUnlessSet) {
  ServeSettings settings;
  EXPECT_EQ(settings.server_name, "rampart");
  const std::string path = WriteTemp("server:\n  server_name: triton\n");
  ASSERT_TRUE(ApplyYamlFile(path, settings).ok());
  EXPECT_EQ(settings.server_name, "triton");
  settings.model_repository = "/models";
  EXPECT_TRUE(Validate(settings).ok());
  settings.server_name.clear();
  EXPECT_EQ(Validate(settings).message(), "--server-name must not be empty");
  std::filesystem::remove(path);
}

// gRPC is served by the native engine unless `core` is asked for; anything else is refused.
TEST(Settings, TheGrpcEngineIsNativeOrCore) {
  ServeSettings settings;
  settings.model_repository = "/models";
  EXPECT_EQ(settings.grpc_engine, "native");
  EXPECT_EQ(settings.grpc_thread_count, 0);  // the engine's default
  EXPECT_TRUE(Validate(settings).ok());
  const std::string path = WriteTemp("server:\n  grpc_engine: core\n  grpc_thread_count: 2\n");
  ASSERT_TRUE(ApplyYamlFile(path, settings).ok());
  EXPECT_EQ(settings.grpc_engine, "core");
  EXPECT_EQ(settings.grpc_thread_count, 2);
  EXPECT_TRUE(Validate(settings).ok());
  settings.grpc_engine = "grpcio";
  EXPECT_EQ(Validate(settings).message(), "--grpc-engine must be 'core' or 'native', got 'grpcio'");
  settings.grpc_engine = "native";
  settings.grpc_thread_count = 65;
  EXPECT_EQ(Validate(settings).code(), StatusCode::kInvalidArgument);
  std::filesystem::remove(path);
}

TEST(Settings, UnknownKeysAndWrongTypesAreErrors) {
  ServeSettings settings;
  const std::string typo = WriteTemp("http:\n  prot: 9000\n");
  Status status = ApplyYamlFile(typo, settings);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("unknown key 'http.prot'"), std::string::npos);
  const std::string wrong_type = WriteTemp("http:\n  port: lots\n");
  status = ApplyYamlFile(wrong_type, settings);
  EXPECT_NE(status.message().find("'http.port' has the wrong type"), std::string::npos);
  const std::string section = WriteTemp("gatway: {}\n");
  EXPECT_NE(ApplyYamlFile(section, settings).message().find("unknown section 'gatway'"),
            std::string::npos);
  // gateway: is read by LoadGatewayConfig, not here.
  EXPECT_TRUE(ApplyYamlFile(WriteTemp("gateway: {models: []}\n"), settings).ok());
  EXPECT_EQ(ApplyYamlFile("/nonexistent/rampart.yaml", settings).code(), StatusCode::kNotFound);
  // A key that is not a name: its conversion used to throw out of the loader.
  const std::string sequence_key = WriteTemp("http:\n  [port]: 9000\n");
  status = ApplyYamlFile(sequence_key, settings);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("line 2"), std::string::npos) << status.message();
  const std::string section_key = WriteTemp("? {a: 1}\n: 2\n");
  EXPECT_EQ(ApplyYamlFile(section_key, settings).code(), StatusCode::kInvalidArgument);
  for (const auto& path : {typo, wrong_type, section, sequence_key, section_key}) {
    std::filesystem::remove(path);
  }
}

TEST(Settings, HttpLimitsHaveDefaultsYamlKeysAndChecks) {
  ServeSettings settings;
  EXPECT_EQ(settings.http_max_connections, 4096);
  EXPECT_EQ(settings.http_header_timeout_secs, 20);
  EXPECT_EQ(settings.default_max_queue_size, 1024u);
  const std::string path = WriteTemp(
      "server:\n  default_max_queue_size: 0\n"
      "http:\n  max_connections: 10\n  idle_timeout_secs: 5\n  header_timeout_secs: 3\n"
      "  body_timeout_secs: 4\n  body_min_rate: 100\n  max_body_bytes_in_flight: 1000\n");
  ASSERT_TRUE(ApplyYamlFile(path, settings).ok());
  EXPECT_EQ(settings.default_max_queue_size, 0u);
  EXPECT_EQ(settings.http_max_connections, 10);
  EXPECT_EQ(settings.http_idle_timeout_secs, 5);
  EXPECT_EQ(settings.http_header_timeout_secs, 3);
  EXPECT_EQ(settings.http_body_timeout_secs, 4);
  EXPECT_EQ(settings.http_body_min_rate, 100u);
  EXPECT_EQ(settings.http_max_body_bytes_in_flight, 1000u);
  settings.model_repository = "/models";
  EXPECT_TRUE(Validate(settings).ok());
  settings.http_header_timeout_secs = 0;
  EXPECT_EQ(Validate(settings).message(), "--http-header-timeout-secs must be at least 1, got 0");
  settings.http_header_timeout_secs = 3;
  settings.http_max_connections = -1;
  EXPECT_EQ(Validate(settings).message(),
            "--http-max-connections must be >= 0 (0: no limit), got -1");
  std::filesystem::remove(path);
}

// Validate() of otherwise valid settings with these CPU lists. (The lists arrive as strings
// moved in: GCC 12 warns falsely about assigning short literals to strings here.)
Status ValidateCpus(std::string instance_cpus, std::string http_cpus) {
  ServeSettings settings;
  settings.model_repository = std::string("/models");
  settings.instance_cpus = std::move(instance_cpus);
  settings.http_cpus = std::move(http_cpus);
  return Validate(settings);
}

TEST(Settings, CpuListsMustParseAndBeAllowed) {
  EXPECT_TRUE(ValidateCpus(std::string("0"), std::string()).ok());
  Status bad = ValidateCpus(std::string(), std::string("0-"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--http-cpus '0-': '0-' is not a CPU number or range"),
            std::string::npos)
      << bad.message();
  bad = ValidateCpus(std::string("1023"), std::string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--instance-cpus '1023': CPU 1023 is not one this process"),
            std::string::npos)
      << bad.message();
}

TEST(Settings, ValidateRejectsImpossibleValues) {
  ServeSettings settings;
  EXPECT_FALSE(Validate(settings).ok());  // no repository
  settings.model_repository = "/models";
  EXPECT_TRUE(Validate(settings).ok());
  settings.model_control_mode = "sometimes";
  EXPECT_FALSE(Validate(settings).ok());
  settings.model_control_mode = "none";
  settings.http_port = 70000;
  EXPECT_FALSE(Validate(settings).ok());
  settings.http_port = 0;
  settings.http_max_input_size = 0;
  EXPECT_FALSE(Validate(settings).ok());
  settings.http_max_input_size = 1024;
  settings.http_threads = -4;  // was taken as "the default"
  EXPECT_EQ(Validate(settings).message(),
            "--http-thread-count must be >= 0 (0: the default), got -4");
  settings.http_threads = 0;
  settings.threads_per_instance = -1;
  EXPECT_EQ(Validate(settings).message(),
            "--threads-per-instance must be >= 0 (0: the default), got -1");
  settings.threads_per_instance = 0;
  // Distinct in microseconds, one bound in seconds: the histogram would refuse them at load.
  settings.metrics_histogram_buckets = "504516.0769861755,504516.07698617555";
  EXPECT_NE(Validate(settings).message().find("--metrics-histogram-buckets: in seconds"),
            std::string::npos)
      << Validate(settings).message();
  settings.metrics_histogram_buckets = "1000,5000";
  EXPECT_TRUE(Validate(settings).ok());
}

TEST(Settings, GrpcKeysLiveUnderServer) {
  ServeSettings settings;
  // Triton's message limit, which tritonclient sends up to.
  EXPECT_EQ(settings.grpc_max_input_size, 2147483647u);
  const std::string path = WriteTemp(
      "server:\n  allow_grpc: false\n  grpc_address: 127.0.0.1\n  grpc_port: 0\n"
      "  grpc_use_ssl_mutual: true\n  grpc_server_cert: /c.pem\n  grpc_server_key: /k.pem\n"
      "  grpc_root_cert: /ca.pem\n  grpc_max_input_size: 2048\n"
      "  grpc_max_inflight_bytes: 4096\n");
  ASSERT_TRUE(ApplyYamlFile(path, settings).ok());
  EXPECT_FALSE(settings.allow_grpc);
  EXPECT_EQ(settings.grpc_address, "127.0.0.1");
  EXPECT_EQ(settings.grpc_port, 0);
  EXPECT_TRUE(settings.grpc_use_ssl_mutual);
  EXPECT_EQ(settings.grpc_server_cert, "/c.pem");
  EXPECT_EQ(settings.grpc_server_key, "/k.pem");
  EXPECT_EQ(settings.grpc_root_cert, "/ca.pem");
  EXPECT_EQ(settings.grpc_max_input_size, 2048u);
  EXPECT_EQ(settings.grpc_max_inflight_bytes, 4096u);
  std::filesystem::remove(path);
}

TEST(Settings, GrpcInflightBytesHoldTheLargestRequest) {
  ServeSettings settings;
  settings.model_repository = "/models";
  EXPECT_EQ(settings.grpc_max_inflight_bytes, uint64_t{4} << 30);
  settings.grpc_max_inflight_bytes = settings.grpc_max_input_size - 1;
  EXPECT_NE(Validate(settings).message().find("must be at least --grpc-max-input-size"),
            std::string::npos);
  settings.grpc_max_input_size = 1024;
  EXPECT_TRUE(Validate(settings).ok());
}

TEST(Settings, GrpcTlsNeedsItsFiles) {
  ServeSettings settings;
  settings.model_repository = "/models";
  settings.grpc_use_ssl = true;
  EXPECT_NE(Validate(settings).message().find("--grpc-server-cert and --grpc-server-key"),
            std::string::npos);
  settings.grpc_server_cert = "/c.pem";
  settings.grpc_server_key = "/k.pem";
  EXPECT_TRUE(Validate(settings).ok());
  settings.grpc_use_ssl_mutual = true;
  EXPECT_NE(Validate(settings).message().find("--grpc-root-cert"), std::string::npos);
  settings.grpc_root_cert = "/ca.pem";
  EXPECT_TRUE(Validate(settings).ok());
  settings.grpc_max_input_size = 1ull << 32;
  EXPECT_FALSE(Validate(settings).ok());
}

TEST(Settings, HttpsKeysLiveUnderHttpAndNeedTheirFiles) {
  ServeSettings settings;
  const std::string path = WriteTemp(
      "http:\n  ssl_cert: /c.pem\n  ssl_key: /k.pem\n  ssl_root_cert: /ca.pem\n"
      "  ssl_mutual: true\n");
  ASSERT_TRUE(ApplyYamlFile(path, settings).ok());
  EXPECT_EQ(settings.http_ssl_cert, "/c.pem");
  EXPECT_EQ(settings.http_ssl_key, "/k.pem");
  EXPECT_EQ(settings.http_ssl_root_cert, "/ca.pem");
  EXPECT_TRUE(settings.http_ssl_mutual);
  std::filesystem::remove(path);

  settings.model_repository = "/models";
  EXPECT_TRUE(Validate(settings).ok());
  settings.http_ssl_root_cert.clear();
  EXPECT_NE(Validate(settings).message().find("--http-ssl-root-cert"), std::string::npos);
  settings.http_ssl_mutual = false;
  EXPECT_TRUE(Validate(settings).ok());
  settings.http_ssl_key.clear();
  EXPECT_NE(Validate(settings).message().find("both --http-ssl-cert and --http-ssl-key"),
            std::string::npos);
}

}  // namespace
}  // namespace rampart::app
