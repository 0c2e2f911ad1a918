// The cost answers with citations add to a gateway call (gateway/knowledge.h), with the search
// itself taken away (a fake that answers at once): what the stage does on its own.
//
//   - hop: posting the search to the knowledge workers and the call resuming (a WorkerPool task
//     that hands its result back through a mutex and a condition variable, as GatewayCall does
//     with its lock);
//   - prompt: the system message with the numbered sources and the request body rewritten with
//     it (KnowledgePrompt + KnowledgeRequestBody);
//   - cite whole: citations and search_results added to a whole answer (WithCitations);
//   - cite chunk: the same on a stream's finish chunk.
//
// Prints microseconds per call for each, with `--passages` sources of `--passage-bytes` bytes.
// In-process, no sockets: the figures are the gateway's own CPU time per knowledge answer.
//
// Usage: build/bench/knowledge_answer_bench [--iterations N] [--passages P] [--passage-bytes B]

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/worker_pool.h"
#include "gateway/knowledge.h"

namespace {

using namespace rampart;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kRequest =
    R"({"model":"kb:vs_0123456789abcdefghijklmn","temperature":0.2,"messages":[{"role":"user",)"
    R"("content":"How do I rotate the master key of the keyring without downtime?"}]})";

constexpr std::string_view kAnswer =
    R"({"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"chat","choices":[)"
    R"({"index":0,"message":{"role":"assistant","content":"Rotate it with rampart keyring )"
    R"(rotate [1]; old envelopes stay readable until rewrapped [2]."},"finish_reason":"stop"}],)"
    R"("usage":{"prompt_tokens":900,"completion_tokens":40,"total_tokens":940}})";

constexpr std::string_view kFinishChunk =
    R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"chat",)"
    R"("choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})";

gateway::KnowledgeSources Sources(int passages, size_t bytes) {
  gateway::KnowledgeSources sources{.vector_store = "vs_0123456789abcdefghijklmn"};
  const std::string_view words =
      "The keyring keeps each tenant's data keys wrapped by the master key; rotation makes a "
      "new master key and rewraps every data key in one transaction \"quoted\" and\tescaped. ";
  for (int i = 0; i < passages; ++i) {
    knowledge::hub::SearchHit hit;
    hit.file_id = fmt::format("file-{:024}", i);
    hit.filename = fmt::format("operations-guide-{}.md", i);
    hit.heading_path = "Keyring > Rotation > Without downtime";
    hit.chunk_index = i * 3;
    hit.score = 0.9 - 0.05 * i;
    while (hit.text.size() < bytes) hit.text += words;
    hit.text.resize(bytes);
    sources.hits.push_back(std::move(hit));
  }
  return sources;
}

template <typename F>
double MicrosPerCall(int iterations, F&& body) {
  for (int i = 0; i < iterations / 10 + 1; ++i) body();  // warm up
  const auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) body();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iterations;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 20000;
  int passages = 5;
  size_t passage_bytes = 800;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--passages") == 0) passages = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--passage-bytes") == 0) passage_bytes = std::atoll(argv[i + 1]);
  }
  const gateway::KnowledgeSources sources = Sources(passages, passage_bytes);
  size_t sink = 0;

  WorkerPool workers("bench-kb", 2, 1024);
  std::mutex mutex;
  std::condition_variable resumed;
  const double hop = MicrosPerCall(iterations, [&] {
    bool done = false;
    (void)workers.Post([&] {
      knowledge::hub::SearchResults found;  // the fake search: nothing to do
      found.hits.reserve(1);
      std::lock_guard lock(mutex);
      done = true;
      resumed.notify_one();
    });
    std::unique_lock lock(mutex);
    resumed.wait(lock, [&] { return done; });
  });
  const double prompt = MicrosPerCall(iterations, [&] {
    Result<std::string> body =
        gateway::KnowledgeRequestBody(kRequest, gateway::KnowledgePrompt(sources));
    sink += body.ok() ? body->size() : 0;
  });
  const double whole = MicrosPerCall(iterations, [&] {
    Result<std::string> cited = gateway::WithCitations(kAnswer, sources);
    sink += cited.ok() ? cited->size() : 0;
  });
  const double chunk = MicrosPerCall(iterations, [&] {
    Result<std::string> cited = gateway::WithCitations(kFinishChunk, sources);
    sink += cited.ok() ? cited->size() : 0;
  });
  std::printf("knowledge answer overhead, %d passages of %zu bytes, %d iterations\n", passages,
              passage_bytes, iterations);
  std::printf("  hop to a worker and back  %8.2f us\n", hop);
  std::printf("  prompt + request body     %8.2f us\n", prompt);
  std::printf("  citations, whole answer   %8.2f us\n", whole);
  std::printf("  citations, finish chunk   %8.2f us\n", chunk);
  std::printf("  total per whole answer    %8.2f us\n", hop + prompt + whole);
  std::printf("(checksum %zu)\n", sink);
  return 0;
}
