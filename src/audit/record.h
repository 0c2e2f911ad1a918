#pragma once

// One audit record: what happened to one request, on every API (KServe inference and control,
// the OpenAI gateway, the guard, admin, later knowledge). Front ends fill it as the request goes
// and hand it to the AuditLog once the request is answered (or, with `audit: sync`, before the
// answer is released).

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "crypto/digest.h"

namespace rampart::audit {

// Names to numbers, in the names' byte order (std::map's), as one sorted vector: a record's
// per-stage latencies and PII counts hold a handful of entries, which this keeps in one
// allocation (a std::map made one per entry on the request's thread, and the log's writer
// walked and freed them node by node). Lookups and insertions search; fine for a handful.
template <typename Value>
class NamedCounts {
 public:
  using value_type = std::pair<std::string, Value>;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  NamedCounts() = default;
  NamedCounts(std::initializer_list<value_type> entries) {
    entries_.reserve(entries.size());
    for (const value_type& entry : entries) (*this)[entry.first] = entry.second;
  }

  // The entry named `name`, made (0) when there is none.
  Value& operator[](std::string_view name) {
    auto at = Find(name);
    if (at == entries_.end() || at->first != name) {
      at = entries_.emplace(at, std::string(name), Value{});
    }
    return at->second;
  }
  bool contains(std::string_view name) const {
    const auto at = Find(name);
    return at != entries_.end() && at->first == name;
  }
  // The entry named `name`; std::out_of_range when there is none (as std::map's; for tests).
  const Value& at(std::string_view name) const {
    const auto found = Find(name);
    if (found == entries_.end() || found->first != name) {
      throw std::out_of_range("no such name in NamedCounts");
    }
    return found->second;
  }

  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() { entries_.clear(); }
  void reserve(size_t count) { entries_.reserve(count); }
  bool operator==(const NamedCounts&) const = default;

 private:
  typename std::vector<value_type>::iterator Find(std::string_view name) {
    return std::lower_bound(entries_.begin(), entries_.end(), name,
                            [](const value_type& entry, std::string_view key) {
                              return std::string_view(entry.first) < key;
                            });
  }
  const_iterator Find(std::string_view name) const {
    return const_cast<NamedCounts*>(this)->Find(name);
  }

  std::vector<value_type> entries_;
};

struct AuditRecord {
  // Filled by the AuditLog on append.
  int64_t sequence = 0;      // 1, 2, ... in the one log, with no gaps
  int64_t time_unix_ns = 0;  // when the request was received (the front end's), else append time

  std::string trace_id;
  std::string request_id;
  std::string api;  // "kserve_http", "kserve_grpc", "openai", "guard", "admin"
  std::string tenant;
  std::string principal;
  std::string auth_method;  // "api_key", "jwt", "mtls", "anonymous", "open"
  std::string key_id;
  std::string source_address;
  std::string action;         // "model:infer", "chat:create", ...
  std::string resource_type;  // "model", ...
  std::string resource;       // the model's name, ...
  bool allowed = true;
  std::vector<std::string> rules;        // the deciding rules
  std::vector<std::string> obligations;  // applied
  NamedCounts<int> pii_input;            // entity type -> count found in the request
  NamedCounts<int> pii_output;
  std::string route;
  std::string target;  // the logical model or upstream that answered
  // The documents an answer drew on: for an answer from a knowledge base, the files of the
  // passages put in its prompt. Encoded only when not empty (records without any read as before).
  std::vector<std::string> documents;
  std::string model_version;
  int64_t tokens_in = 0;
  int64_t tokens_out = 0;
  int64_t instance_ns = 0;         // instance (accelerator) time the request used
  NamedCounts<int64_t> stages_ns;  // per-stage latency ("queue", "compute", "gateway")
  int64_t latency_ns = 0;
  int status = 0;       // the HTTP status (gRPC: the HTTP equivalent) the caller got
  std::string outcome;  // "ok" or the error's kind

  // The request's and answer's content: digests only ("sm3:..." / "sha256:..." of the bytes),
  // unless policy said audit:full, in which case `*_sealed` hold the content sealed with the
  // envelope AEAD (base64) and the digests are still kept.
  std::string request_digest;
  std::string response_digest;
  std::string request_sealed;
  std::string response_sealed;
};

// A request's and its answer's content digests as raw bytes, as audit::Recorder makes them and
// the log stores them: the record's `request_digest` and `response_digest` hold the same as text
// ("sha256:<hex>", "sm3:<hex>") when read back, but the request's thread never formats them.
struct ContentDigests {
  crypto::DigestAlgorithm algorithm = crypto::DigestAlgorithm::kSha256;
  crypto::Digest request{};
  crypto::Digest response{};
};

}  // namespace rampart::audit
