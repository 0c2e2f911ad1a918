#pragma once

// The knowledge hub's Embedder (knowledge/hub/vector_stores.h) over one of the gateway's
// targets, named in the config: a local model of Rampart's repository (gateway/local_target.h:
// one inference request per text, grouped by the model's dynamic batcher) or an upstream's
// OpenAI /v1/embeddings (the target's endpoints tried in order of priority, each with the
// upstream's headers and timeouts). The call goes to the target directly, not through a route:
// no access stages, quotas or audit records (the caller, the vector stores service, has decided
// already) and no guard (ingested text is guarded, if at all, before it is embedded).
//
// Texts are sent in batches of at most `batch_size`; one Embed call waits at most `deadline` for
// all of them (Unavailable after it: the answers that come later are dropped).
//
// The routing table in force at each call is used, so a reload that changes the target takes
// effect at the next call; a target whose dimension changed is an error (Internal), since the
// store's vectors would no longer compare.
//
// Threads: Embed blocks; call it from worker threads, never from an I/O thread or a thread
// that a local model's answers need (the inference server's). Thread-safe.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "gateway/gateway.h"
#include "knowledge/hub/vector_stores.h"

namespace rampart::gateway {

struct EmbedderOptions {
  // A target of the gateway's config; empty: the first target with a local model.
  std::string target;
  size_t batch_size = 64;
  std::chrono::milliseconds deadline{120'000};  // per Embed call
};

class GatewayEmbedder final : public knowledge::hub::Embedder {
 public:
  // Embeds a probe text to learn the dimension. Errors: NotFound for an unknown target (or no
  // local one when none is named), the probe's error otherwise. `gateway` must outlive it.
  static Result<std::unique_ptr<GatewayEmbedder>> Create(const Gateway& gateway,
                                                         EmbedderOptions options);

  Result<std::vector<std::vector<float>>> Embed(const std::vector<std::string>& texts) override;
  size_t dimension() const override { return dimension_; }
  // "<target>" and the dimension: "text-embedding/384".
  std::string name() const override;

  const std::string& target() const { return options_.target; }

 private:
  GatewayEmbedder(const Gateway& gateway, EmbedderOptions options)
      : gateway_(gateway), options_(std::move(options)) {}
  // One batch, waiting until `until`.
  Result<std::vector<std::vector<float>>> EmbedBatch(std::vector<std::string> texts,
                                                     std::chrono::steady_clock::time_point until);

  const Gateway& gateway_;
  EmbedderOptions options_;
  size_t dimension_ = 0;
};

// The vectors of an OpenAI embeddings answer ({"data":[{"index","embedding":[floats]}]}), in
// index order; `count` of them. InvalidArgument when it is not one.
Result<std::vector<std::vector<float>>> ParseEmbeddingsAnswer(std::string_view body, size_t count);

}  // namespace rampart::gateway
