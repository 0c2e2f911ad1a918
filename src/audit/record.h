#pragma once

// One audit record: what happened to one request, on every API (KServe inference and control,
// the OpenAI gateway, the guard, admin, later knowledge). Front ends fill it as the request goes
// and hand it to the AuditLog once the request is answered (or, with `audit: sync`, before the
// answer is released).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rampart::audit {

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
  std::map<std::string, int> pii_input;  // entity type -> count found in the request
  std::map<std::string, int> pii_output;
  std::string route;
  std::string target;  // the logical model or upstream that answered
  // The documents an answer drew on: for an answer from a knowledge base, the files of the
  // passages put in its prompt. Encoded only when not empty (records without any read as before).
  std::vector<std::string> documents;
  std::string model_version;
  int64_t tokens_in = 0;
  int64_t tokens_out = 0;
  int64_t instance_ns = 0;                   // instance (accelerator) time the request used
  std::map<std::string, int64_t> stages_ns;  // per-stage latency ("queue", "compute", "gateway")
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

}  // namespace rampart::audit
