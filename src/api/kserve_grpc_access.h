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

#include <grpcpp/grpcpp.h>

#include "core/peer.h"
#include "identity/identity.h"
#include "policy/access.h"

namespace rampart::api::grpc_access {

// "1.2.3.4" from "ipv4:1.2.3.4:5678", "::1" from "ipv6:[::1]:5678"; empty for anything else
// (a Unix socket).
std::string AddressOfPeer(std::string_view grpc_peer);

// The call's peer: its address and, when the TLS layer verified one, its client certificate.
Peer PeerOf(const grpc::ServerContextBase& context);

// The credentials of a call whose peer is `peer`: views into the context's metadata and `peer`,
// valid while both live.
identity::Credentials CredentialsOf(const grpc::ServerContextBase& context, const Peer& peer);

// The gRPC status a refusal answers with (the message as HTTP's).
grpc::Status StatusOf(const policy::AccessRefusal& refusal);

}  // namespace rampart::api::grpc_access
