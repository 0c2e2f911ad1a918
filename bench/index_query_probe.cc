// bench/pinecone_http_bench.sh's measuring tool: loads an index folder with clustered vectors and
// writes a Pinecone query body; then runs that same query in-process (IndexBackend::Query on T
// threads, the folder opened read-only beside the server) and over HTTP (T keep-alive loopback
// connections to `rampart serve` on the same folder, one blocking request at a time each),
// alternating round by round so that a busy phase of the machine weighs on both alike.
//
//   index_query_probe load  --indexes DIR --index NAME --count N --dimension D --query-file FILE
//   index_query_probe query --indexes DIR --index NAME --query-file FILE --threads 1,2
//                           --rounds R --seconds S [--port P]
//
// `load` writes FILE with {"topK":10,"vector":[...],"namespace":""}, a point near one of the
// clusters. `query` opens the folder once (recovering an index rebuilds its graph, which takes
// long), parses FILE with the front end's own codec (api/pinecone_codec.h), and for each thread
// count and round prints "path=<in-process|http> threads=<t> round=<r> qps=<n> p50_us=<n>
// p99_us=<n>" (http only with --port: POST /pinecone/indexes/NAME/query on 127.0.0.1:P).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

#include <CLI/CLI.hpp>

#include "api/pinecone_codec.h"
#include "json/writer.h"
#include "knowledge/index/backend.h"

namespace rampart {
namespace {

struct Args {
  std::string indexes;
  std::string index = "bench";
  std::string query_file;
  size_t count = 100000;
  size_t dimension = 128;
  size_t clusters = 64;
  std::vector<int> threads = {1, 2};
  int rounds = 3;
  double seconds = 5;
  int port = 0;
};

int Fail(const Status& status) {
  std::fprintf(stderr, "index_query_probe: %s\n", status.ToString().c_str());
  return 1;
}

Result<std::unique_ptr<knowledge::IndexCatalog>> Open(const Args& args) {
  knowledge::CatalogOptions options;
  options.directory = args.indexes;
  // Querying beside a running server: the folder is the server's, so it is only read.
  options.read_only = args.port != 0;
  return knowledge::OpenIndexCatalog(options);
}

int Load(const Args& args) {
  Result<std::unique_ptr<knowledge::IndexCatalog>> catalog = Open(args);
  if (!catalog.ok()) return Fail(catalog.status());
  knowledge::IndexSpec spec;
  spec.name = args.index;
  spec.engine.dimension = args.dimension;
  spec.engine.metric = knowledge::Metric::kCosine;
  Result<std::shared_ptr<knowledge::IndexBackend>> index = (*catalog)->Create(spec);
  if (!index.ok()) return Fail(index.status());
  // Clusters: centres uniform in [-1, 1], members a centre plus noise of 0.1.
  std::mt19937 random(42);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::normal_distribution<float> noise(0, 0.1f);
  std::vector<std::vector<float>> centres(args.clusters, std::vector<float>(args.dimension));
  for (auto& centre : centres) {
    for (float& value : centre) value = uniform(random);
  }
  const auto near = [&](size_t cluster) {
    std::vector<float> values = centres[cluster % args.clusters];
    for (float& value : values) value += noise(random);
    return values;
  };
  constexpr size_t kBatch = 1000;
  for (size_t start = 0; start < args.count; start += kBatch) {
    std::vector<knowledge::VectorRecord> records;
    for (size_t i = start; i < std::min(args.count, start + kBatch); ++i) {
      records.push_back({.id = "v" + std::to_string(i),
                         .values = near(i),
                         .metadata = {{"cluster", static_cast<double>(i % args.clusters)}}});
    }
    std::promise<Status> written;
    (*index)->Upsert("", std::move(records),
                     [&written](Status status) { written.set_value(std::move(status)); });
    if (Status status = written.get_future().get(); !status.ok()) return Fail(status);
  }
  json::Writer writer;
  writer.StartObject();
  writer.Key("topK");
  writer.Uint64(10);
  writer.Key("vector");
  writer.StartArray();
  for (float value : near(7)) writer.Float(value);
  writer.EndArray();
  writer.Key("namespace");
  writer.String("");
  writer.EndObject();
  std::ofstream(args.query_file) << writer.Take();
  std::printf("loaded %zu vectors of %zu dimensions in %zu clusters into '%s'\n", args.count,
              args.dimension, args.clusters, args.index.c_str());
  return 0;
}

// Runs `call(thread)` in a loop on `threads` threads for `seconds` and prints the round's line;
// a call that fails ends the bench (the figures would not be of the query).
void RunRound(std::string_view path, int threads, int round, double seconds,
              const std::function<bool(int)>& call) {
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::vector<std::vector<int64_t>> latencies(threads);
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      while (!stop.load(std::memory_order_relaxed)) {
        const auto started = std::chrono::steady_clock::now();
        if (!call(t)) {
          failed = true;
          return;
        }
        latencies[t].push_back(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now() - started)
                                   .count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the round's length
  stop = true;
  for (std::thread& thread : running) thread.join();
  if (failed) {
    std::fprintf(stderr, "index_query_probe: a %.*s query failed\n", static_cast<int>(path.size()),
                 path.data());
    std::exit(1);
  }
  std::vector<int64_t> all;
  for (const auto& some : latencies) all.insert(all.end(), some.begin(), some.end());
  std::sort(all.begin(), all.end());
  const auto percentile = [&](double p) {
    return all.empty() ? 0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))];
  };
  std::printf("path=%.*s threads=%d round=%d qps=%.0f p50_us=%lld p99_us=%lld\n",
              static_cast<int>(path.size()), path.data(), threads, round,
              static_cast<double>(all.size()) / seconds, static_cast<long long>(percentile(0.5)),
              static_cast<long long>(percentile(0.99)));
  std::fflush(stdout);
}

// One keep-alive HTTP/1.1 connection to 127.0.0.1:port that POSTs a fixed request and reads
// each answer whole (Content-Length), as a client in a blocking loop does.
class LoopbackClient {
 public:
  LoopbackClient(int port, std::string request) : request_(std::move(request)) {
    socket_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int one = 1;
    ::setsockopt(socket_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::connect(socket_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(socket_);
      socket_ = -1;
    }
  }
  ~LoopbackClient() {
    if (socket_ >= 0) ::close(socket_);
  }
  LoopbackClient(const LoopbackClient&) = delete;
  LoopbackClient& operator=(const LoopbackClient&) = delete;

  // One request and its answer; false on any failure or a status other than 200.
  bool Call() {
    if (socket_ < 0) return false;
    for (size_t sent = 0; sent < request_.size();) {
      const ssize_t wrote = ::send(socket_, request_.data() + sent, request_.size() - sent, 0);
      if (wrote <= 0) return false;
      sent += static_cast<size_t>(wrote);
    }
    std::string answer;
    size_t head_end = std::string::npos;
    size_t total = 0;
    char buffer[16384];
    while (head_end == std::string::npos || answer.size() < total) {
      const ssize_t got = ::recv(socket_, buffer, sizeof(buffer), 0);
      if (got <= 0) return false;
      answer.append(buffer, static_cast<size_t>(got));
      if (head_end == std::string::npos &&
          (head_end = answer.find("\r\n\r\n")) != std::string::npos) {
        const size_t length = answer.find("Content-Length: ");
        if (length == std::string::npos || length > head_end) return false;
        total = head_end + 4 + std::strtoull(answer.c_str() + length + 16, nullptr, 10);
      }
    }
    return answer.compare(0, 12, "HTTP/1.1 200") == 0;
  }

 private:
  int socket_ = -1;
  const std::string request_;
};

int Query(const Args& args) {
  Result<std::unique_ptr<knowledge::IndexCatalog>> catalog = Open(args);
  if (!catalog.ok()) return Fail(catalog.status());
  Result<std::shared_ptr<knowledge::IndexBackend>> index = (*catalog)->Get(args.index);
  if (!index.ok()) return Fail(index.status());
  std::stringstream body;
  body << std::ifstream(args.query_file).rdbuf();
  json::Parser parser;
  Result<knowledge::QueryRequest> request =
      api::pinecone::ParseQuery(parser, body.str(), (*index)->spec().engine.dimension);
  if (!request.ok()) return Fail(request.status());
  const std::string http_request = fmt::format(
      "POST /pinecone/indexes/{}/query HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n"
      "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
      args.index, args.port, body.str().size(), body.str());
  for (int threads : args.threads) {
    std::vector<std::unique_ptr<LoopbackClient>> clients;
    if (args.port != 0) {
      for (int t = 0; t < threads; ++t) {
        clients.push_back(std::make_unique<LoopbackClient>(args.port, http_request));
      }
    }
    for (int round = 1; round <= args.rounds; ++round) {
      RunRound("in-process", threads, round, args.seconds,
               [&](int) { return (*index)->Query(*request).ok(); });
      if (args.port == 0) continue;
      RunRound("http", threads, round, args.seconds,
               [&](int thread) { return clients[thread]->Call(); });
    }
  }
  return 0;
}

}  // namespace
}  // namespace rampart

int main(int argc, char** argv) {
  rampart::Args args;
  CLI::App app("Loads an index folder, and queries it in-process (bench/pinecone_http_bench.sh)");
  app.require_subcommand(1);
  for (CLI::App* command :
       {app.add_subcommand("load", "Create NAME with clustered vectors and write the query body"),
        app.add_subcommand("query", "Run the query body against NAME in-process")}) {
    command->add_option("--indexes", args.indexes, "The indexes folder")->required();
    command->add_option("--index", args.index, "The index's name");
    command->add_option("--query-file", args.query_file, "The query body (JSON)")->required();
  }
  CLI::App* load = app.get_subcommand("load");
  load->add_option("--count", args.count, "Vectors");
  load->add_option("--dimension", args.dimension, "Dimensions");
  load->add_option("--clusters", args.clusters, "Clusters the vectors are drawn around");
  CLI::App* query = app.get_subcommand("query");
  query->add_option("--threads", args.threads, "Query thread counts, each run in turn")
      ->delimiter(',');
  query->add_option("--rounds", args.rounds, "Rounds of each thread count");
  query->add_option("--seconds", args.seconds, "Length of a round");
  query->add_option(
      "--port", args.port,
      "Rampart's HTTP port on 127.0.0.1, serving the same folder (0: in-process only)");
  CLI11_PARSE(app, argc, argv);
  return load->parsed() ? rampart::Load(args) : rampart::Query(args);
}
