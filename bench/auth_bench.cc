// Authentication's cost per request: identity::Authenticator::Authenticate for each kind of
// credential, against a baseline measured in the same run.
//
// Baseline: parsing the body of a KServe v2 infer request for `simple` (two INT32 [1,16]
// inputs, 204 bytes) with json::Parser, a cost every JSON request pays anyway; the ratio column
// says how many such parses authenticating costs. Also shown: anonymous access (the
// Authenticator's floor: a header check and a CIDR match).
//
// Credentials: an API key (x-api-key; 1,000 keys in the table, so the lookup is a real one:
// SHA-256 of salt and key, a constant-time compare), JWTs signed with HS256, RS256 (2048-bit)
// and ES256 (P-256) from a JWKS file of three keys (each with its kid), and a client certificate
// mapped by a SPIFFE rule. The store behind the key table is the in-memory test store: Verify
// never touches a store, so which one does not matter here.
//
// Usage: build/bench/auth_bench [--benchmark_min_time=0.5] (Google Benchmark flags)

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "identity/authenticator.h"
#include "json/reader.h"
#include "testing/jwt_signer.h"
#include "testing/memory_store.h"

namespace {

using rampart::Peer;
using rampart::identity::Authenticator;
using rampart::identity::Credentials;
using rampart::testing::TestSigningKey;

constexpr int64_t kNow = 1'800'000'000;

const char kSimpleBody[] = R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],)"
                           R"("data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},)"
                           R"({"name":"INPUT1","datatype":"INT32","shape":[1,16],)"
                           R"("data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]})";

struct Setup {
  rampart::testing::MemoryStore store;
  std::unique_ptr<rampart::identity::ApiKeyTable> keys;
  std::unique_ptr<Authenticator> authenticator;
  std::string api_key;
  std::map<std::string, std::string> bearer;  // algorithm -> "Bearer <jwt>"
  Peer loopback{.address = "127.0.0.1"};
  Peer workload;
  std::filesystem::path jwks;
};

Setup& Shared() {
  static Setup* setup = [] {
    auto* s = new Setup;
    if (!s->store.CreateTenant({.name = "acme"}).ok()) std::abort();
    for (int i = 0; i < 1000; ++i) {
      rampart::identity::NewApiKey key = rampart::identity::GenerateApiKey(
          "acme", "user" + std::to_string(i % 50), "bench", {"analyst"}, kNow);
      if (!s->store.CreateApiKey(key.record).ok()) std::abort();
      if (i == 500) s->api_key = key.key;
    }
    s->keys = std::move(*rampart::identity::ApiKeyTable::Open(s->store));

    static const TestSigningKey hs = TestSigningKey::Hmac("hs", std::string(32, 'k'));
    static const TestSigningKey rs = TestSigningKey::Rsa("rs");
    static const TestSigningKey es = TestSigningKey::Ec("es");
    s->jwks = std::filesystem::temp_directory_path() /
              ("rampart_auth_bench_" + std::to_string(::getpid()) + ".json");
    std::ofstream(s->jwks) << rampart::testing::JwksJson({&hs, &rs, &es});
    const std::string claims =
        R"({"iss":"https://idp.example.com","aud":"rampart","sub":"user7","tid":"acme",)"
        R"("exp":1800003600,"iat":1799999000,"roles":["analyst"],"dept":"research"})";
    for (const TestSigningKey* key : {&hs, &rs, &es}) {
      s->bearer[key->algorithm()] = "Bearer " + key->Token(claims);
    }

    rampart::identity::AuthenticatorOptions options;
    options.anonymous.from = {*rampart::IpNetwork::Parse("127.0.0.1/32")};
    rampart::identity::JwtOptions jwt;
    jwt.jwks_file = s->jwks.string();
    jwt.issuer = "https://idp.example.com";
    jwt.audiences = {"rampart"};
    jwt.algorithms = {"HS256", "RS256", "ES256"};
    jwt.claims.tenant = "tid";
    jwt.claims.attributes = {{"department", "dept"}};
    options.jwt = jwt;
    rampart::identity::MtlsRule rule;
    rule.spiffe = "spiffe://acme.internal/ns/*/sa/*";
    rule.tenant = "acme";
    rule.principal = "{spiffe_path}";
    options.mtls = {rule};
    s->authenticator = std::move(*Authenticator::Make(options, s->keys.get()));

    s->workload.address = "10.0.0.8";
    s->workload.has_certificate = true;
    s->workload.certificate.common_name = "web";
    s->workload.certificate.subject = "CN=web,O=Acme";
    s->workload.certificate.uris = {"spiffe://acme.internal/ns/prod/sa/web"};
    return s;
  }();
  return *setup;
}

void Baseline(benchmark::State& state) {
  rampart::json::Parser parser;
  for (auto _ : state) {
    auto root = parser.Parse(kSimpleBody);
    benchmark::DoNotOptimize(root);
  }
}

void Authenticate(benchmark::State& state, const Credentials& credentials) {
  const Authenticator& authenticator = *Shared().authenticator;
  for (auto _ : state) {
    auto identity = authenticator.Authenticate(credentials, kNow);
    if (!identity.ok()) {
      state.SkipWithError(identity.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(identity);
  }
}

class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (!run.error_occurred && run.iterations > 0) {
        ns_[run.benchmark_name()] = run.GetAdjustedCPUTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double ns(const std::string& name) const {
    auto it = ns_.find(name);
    return it == ns_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, double> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  Setup& setup = Shared();
  const std::vector<std::pair<std::string, Credentials>> cases = {
      {"anonymous", Credentials{.peer = &setup.loopback}},
      {"api_key", Credentials{.api_key = setup.api_key, .peer = &setup.loopback}},
      {"jwt_hs256", Credentials{.authorization = setup.bearer["HS256"]}},
      {"jwt_rs256", Credentials{.authorization = setup.bearer["RS256"]}},
      {"jwt_es256", Credentials{.authorization = setup.bearer["ES256"]}},
      {"mtls", Credentials{.peer = &setup.workload}},
  };
  benchmark::RegisterBenchmark("baseline/parse_simple_request", Baseline);
  for (const auto& [name, credentials] : cases) {
    benchmark::RegisterBenchmark(("auth/" + name).c_str(), Authenticate, credentials);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);

  const double baseline = collector.ns("baseline/parse_simple_request");
  std::printf("\nbaseline: parsing the `simple` infer body (%zu bytes): %.3f us\n",
              sizeof(kSimpleBody) - 1, baseline / 1000);
  std::printf("%-12s %12s %20s\n", "credential", "us/request", "x baseline");
  for (const auto& [name, credentials] : cases) {
    const double ns = collector.ns("auth/" + name);
    if (ns <= 0 || baseline <= 0) continue;
    std::printf("%-12s %12.3f %20.2f\n", name.c_str(), ns / 1000, ns / baseline);
  }
  std::filesystem::remove(setup.jwks);
  benchmark::Shutdown();
  return 0;
}
