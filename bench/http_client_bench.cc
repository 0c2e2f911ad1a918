// HttpClient against Rampart's own HttpServer in one process, on loopback: calls per second with
// `concurrency` calls in flight on kept-alive connections, and heap allocations per call on the
// client's I/O thread (where the calls are sent again from OnComplete, so Send's own allocations
// count too).
//
//   http_client_bench [seconds=3] [concurrency=64] [body_bytes=256]

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>

#include "net/http_client.h"
#include "net/http_server.h"

namespace {

thread_local bool counting = false;  // set on the client's I/O thread by the first sink call
std::atomic<uint64_t> allocations{0};

}  // namespace

void* operator new(size_t size) {
  if (counting) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, size_t) noexcept { std::free(memory); }

namespace rampart::net {
namespace {

struct Bench {
  HttpClient* client = nullptr;
  Endpoint endpoint;
  std::string body;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<int> running{0};
};

class LoopSink final : public HttpResponseSink {
 public:
  explicit LoopSink(Bench& bench) : bench_(bench) {}
  void OnHead(const HttpClientResponseHead&) override { counting = true; }
  bool OnBody(std::string_view) override { return true; }
  void OnComplete(const Status& status, HttpClientError) override {
    counting = true;
    (status.ok() ? bench_.completed : bench_.failed).fetch_add(1, std::memory_order_relaxed);
    Next(bench_);
  }

  static void Next(Bench& bench) {
    if (bench.stop.load()) {
      --bench.running;
      return;
    }
    HttpClientRequest request;
    request.method = "POST";
    request.target = "/v1/chat/completions";
    request.headers.Reserve(2, 64);  // the request's own allocations: 2 here, body and sink 2
    request.headers.Add("Content-Type", "application/json");
    request.headers.Add("Authorization", "Bearer bench");
    request.body = bench.body;
    bench.client->Send(bench.endpoint, std::move(request), std::make_shared<LoopSink>(bench));
  }

 private:
  Bench& bench_;
};

int Run(int seconds, int concurrency, size_t body_bytes) {
  HttpServerOptions server_options;
  server_options.address = "127.0.0.1";
  server_options.port = 0;
  server_options.threads = 1;
  auto server = HttpServer::Start(server_options, [](HttpRequest&&, Responder responder) {
    HttpResponse response;
    response.body = R"({"choices":[{"message":{"content":"ok"}}]})";
    responder.Send(std::move(response));
  });
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  auto client = HttpClient::Create({.threads = 1});
  if (!client.ok()) return 1;
  Bench bench;
  bench.client = client->get();
  bench.endpoint = *ParseEndpoint("http://127.0.0.1:" + std::to_string((*server)->port()));
  bench.body.assign(body_bytes, 'x');
  bench.running = concurrency;
  for (int i = 0; i < concurrency; ++i) LoopSink::Next(bench);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // warm-up: connections open
  const uint64_t calls_before = bench.completed.load();
  const uint64_t allocations_before = allocations.load();
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const uint64_t calls = bench.completed.load() - calls_before;
  const uint64_t allocated = allocations.load() - allocations_before;
  bench.stop = true;
  while (bench.running.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const HttpClient::Stats stats = bench.client->stats();
  std::printf(
      "concurrency %d, body %zu B: %.0f calls/s, %.2f allocations per call on the client thread, "
      "%lu connections opened, %lu failed calls\n",
      concurrency, body_bytes, static_cast<double>(calls) / elapsed,
      calls == 0 ? 0.0 : static_cast<double>(allocated) / static_cast<double>(calls),
      static_cast<unsigned long>(stats.connections_opened),
      static_cast<unsigned long>(bench.failed.load()));
  client->reset();
  (*server)->Shutdown(std::chrono::seconds(5));
  return 0;
}

}  // namespace
}  // namespace rampart::net

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 3;
  const int concurrency = argc > 2 ? std::atoi(argv[2]) : 64;
  const size_t body_bytes = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 256;
  return rampart::net::Run(seconds, concurrency, body_bytes);
}
