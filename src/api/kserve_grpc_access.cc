#include "api/kserve_grpc_access.h"

#include "api/kserve_grpc_codec.h"
#include "net/peer_certificate.h"

namespace rampart::api::grpc_access {
namespace {

std::string_view Metadata(const grpc::ServerContextBase& context, std::string_view key) {
  const auto& metadata = context.client_metadata();
  auto found = metadata.find(grpc::string_ref(key.data(), key.size()));
  if (found == metadata.end()) return {};
  return std::string_view(found->second.data(), found->second.size());
}

}  // namespace

std::string AddressOfPeer(std::string_view grpc_peer) {
  if (grpc_peer.substr(0, 5) == "ipv4:") {
    const std::string_view rest = grpc_peer.substr(5);
    return std::string(rest.substr(0, rest.rfind(':')));
  }
  if (grpc_peer.substr(0, 6) == "ipv6:[") {
    const std::string_view rest = grpc_peer.substr(6);
    const size_t end = rest.find(']');
    if (end == std::string_view::npos) return {};
    std::string address(rest.substr(0, end));
    // An IPv4-mapped address is written as IPv4, as the HTTP server writes it.
    if (address.substr(0, 7) == "::ffff:" && address.find('.') != std::string::npos) {
      address.erase(0, 7);
    }
    return address;
  }
  return {};
}

Peer PeerOf(const grpc::ServerContextBase& context) {
  Peer peer;
  peer.address = AddressOfPeer(context.peer());
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    const std::vector<grpc::string_ref> pem = auth->FindPropertyValues("x509_pem_cert");
    if (!pem.empty()) {
      Result<PeerCertificate> certificate =
          net::PeerCertificateFromPem(std::string_view(pem.front().data(), pem.front().size()));
      if (certificate.ok()) {
        peer.has_certificate = true;
        peer.certificate = std::move(certificate).value();
      }
    }
  }
  return peer;
}

identity::Credentials CredentialsOf(const grpc::ServerContextBase& context, const Peer& peer) {
  identity::Credentials credentials;
  credentials.authorization = Metadata(context, "authorization");
  credentials.api_key = Metadata(context, "x-api-key");
  if (credentials.api_key.empty()) credentials.api_key = Metadata(context, "api-key");
  credentials.peer = &peer;
  return credentials;
}

grpc::Status StatusOf(const policy::AccessRefusal& refusal) {
  return ToGrpcStatus(refusal.ToStatus());
}

}  // namespace rampart::api::grpc_access
