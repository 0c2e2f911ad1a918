#pragma once

// Access control for the gRPC front end (internal to api/kserve_grpc; docs/access.md): a call's
// credentials from its metadata (`authorization`, `x-api-key`), its peer from
// ServerContext::peer() ("ipv4:1.2.3.4:5678", "ipv6:[::1]:5678") and, on mutual TLS, the client
// certificate from the AuthContext (`x509_pem_cert`), read as the HTTPS server reads its own
// (net::PeerCertificateFromPem). Refusals become UNAUTHENTICATED, PERMISSION_DENIED or
// RESOURCE_EXHAUSTED with the same reasons HTTP gives. Thread-safe.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "core/peer.h"
#include "identity/identity.h"
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

// The call's peer: its address and, when the TLS layer verified one, its client certificate.
Peer PeerOf(const grpc::ServerContextBase& context);

// The credentials of a call whose peer is `peer`: views into the context's metadata and `peer`,
// valid while both live.
identity::Credentials CredentialsOf(const grpc::ServerContextBase& context, const Peer& peer);

// The request id a call's refusal names: `given` (the id the request carries, e.g.
// ModelInferRequest.id) when not empty, else the call's `x-request-id` metadata when it is sane
// (printable, at most 128 bytes, as HTTP takes the header), else a generated "req_<trace id>".
std::string RequestIdOf(const grpc::ServerContextBase& context, std::string_view given = {});

// The gRPC status a refusal answers with: the message as HTTP's, PERMISSION_DENIED naming
// `request_id` as HTTP's 403 does.
grpc::Status StatusOf(const policy::AccessRefusal& refusal, std::string_view request_id);

}  // namespace rampart::api::grpc_access
