#pragma once

// Access control for the gRPC front end (internal to api/kserve_grpc; docs/access.md): a call's
// credentials from its metadata (`authorization`, `x-api-key`) and its peer, read through a
// CallView whichever transport carries the call: gRPC core's ServerContext (the peer from
// ServerContext::peer(), "ipv4:1.2.3.4:5678", "ipv6:[::1]:5678", and on mutual TLS the client
// certificate from the AuthContext's `x509_pem_cert`, read as the HTTPS server reads its own) or
// Rampart's own HTTP/2 transport (net::GrpcCall). Refusals become UNAUTHENTICATED,
// PERMISSION_DENIED or RESOURCE_EXHAUSTED with the same reasons HTTP gives. Thread-safe.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "core/peer.h"
#include "identity/identity.h"
#include "net/grpc_server.h"
#include "policy/access.h"

namespace rampart::api::grpc_access {

// What an RPC of GRPCInferenceService is decided as: the policy action and the type of the
// resource it acts on (docs/access.md). ServerLive and ServerReady are open (probes) and absent.
struct RpcAction {
  std::string_view method;  // "ModelInfer", "ModelMetadata", ...
  std::string_view action;  // "model:infer", "model:read", ...
  std::string_view resource_type;
};
// Every decided RPC, one entry each.
const std::vector<RpcAction>& RpcActions();
// The entry of `method`. REQUIRES: `method` is in RpcActions() (CHECKed).
const RpcAction& RpcActionOf(std::string_view method);

// "1.2.3.4" from "ipv4:1.2.3.4:5678", "::1" from "ipv6:[::1]:5678"; empty for anything else
// (a Unix socket).
std::string AddressOfPeer(std::string_view grpc_peer);

// What access control and the audit record read of a call, and where a refusal's trailing
// metadata goes, whichever transport carries it. Lives as long as the call's handler runs.
class CallView {
 public:
  // The first value of metadata `key` (lower case), or empty.
  virtual std::string_view Metadata(std::string_view key) const = 0;
  // The call's peer: its address and, when the TLS layer verified one, its client certificate.
  virtual Peer PeerOf() const = 0;
  // The peer's address alone ("1.2.3.4", "::1"; empty for a Unix socket).
  virtual std::string PeerAddress() const = 0;
  virtual void AddTrailingMetadata(std::string key, std::string value) = 0;

 protected:
  ~CallView() = default;
};

// A call on gRPC core's server.
class ServerContextView final : public CallView {
 public:
  explicit ServerContextView(grpc::ServerContextBase& context) : context_(context) {}
  std::string_view Metadata(std::string_view key) const override;
  Peer PeerOf() const override;
  std::string PeerAddress() const override;
  void AddTrailingMetadata(std::string key, std::string value) override {
    context_.AddTrailingMetadata(key, value);
  }

 private:
  grpc::ServerContextBase& context_;
};

// A call on Rampart's own HTTP/2 transport; trailing metadata is collected for its Finish.
class GrpcCallView final : public CallView {
 public:
  explicit GrpcCallView(const net::GrpcCall& call) : call_(call) {}
  std::string_view Metadata(std::string_view key) const override { return call_.Metadata(key); }
  Peer PeerOf() const override { return call_.peer(); }
  std::string PeerAddress() const override { return call_.peer().address; }
  void AddTrailingMetadata(std::string key, std::string value) override {
    trailers_.emplace_back(std::move(key), std::move(value));
  }
  net::GrpcMetadata TakeTrailers() { return std::move(trailers_); }

 private:
  const net::GrpcCall& call_;
  net::GrpcMetadata trailers_;
};

// The credentials of a call whose peer is `peer`: views into the call's metadata and `peer`,
// valid while both live.
identity::Credentials CredentialsOf(const CallView& call, const Peer& peer);

// The request id a call's refusal names: `given` (the id the request carries, e.g.
// ModelInferRequest.id) when not empty, else the call's `x-request-id` metadata when it is sane
// (printable, at most 128 bytes, as HTTP takes the header), else a generated "req_<trace id>".
std::string RequestIdOf(const CallView& call, std::string_view given = {});

// The gRPC status a refusal answers with: the message as HTTP's, PERMISSION_DENIED naming
// `request_id` as HTTP's 403 does.
grpc::Status StatusOf(const policy::AccessRefusal& refusal, std::string_view request_id);

}  // namespace rampart::api::grpc_access
