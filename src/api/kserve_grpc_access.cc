#include "api/kserve_grpc_access.h"

#include <algorithm>

#include "api/kserve_grpc_codec.h"
#include "core/check.h"
#include "core/trace.h"
#include "net/peer_certificate.h"

namespace rampart::api::grpc_access {
std::string_view ServerContextView::Metadata(std::string_view key) const {
  const auto& metadata = context_.client_metadata();
  auto found = metadata.find(grpc::string_ref(key.data(), key.size()));
  if (found == metadata.end()) return {};
  return std::string_view(found->second.data(), found->second.size());
}

std::string ServerContextView::PeerAddress() const { return AddressOfPeer(context_.peer()); }

const std::vector<RpcAction>& RpcActions() {
  static const std::vector<RpcAction> actions = {
      {"ModelReady", "model:read", "model"},
      {"ModelMetadata", "model:read", "model"},
      {"ModelConfig", "model:read", "model"},
      {"ModelStatistics", "model:read", "model"},
      {"ServerMetadata", "server:read", "server"},
      {"RepositoryIndex", "repository:read", "repository"},
      {"RepositoryModelLoad", "model:load", "model"},
      {"RepositoryModelUnload", "model:unload", "model"},
      {"ModelInfer", "model:infer", "model"},
      {"ModelStreamInfer", "model:infer", "model"},
  };
  return actions;
}

const RpcAction& RpcActionOf(std::string_view method) {
  const std::vector<RpcAction>& actions = RpcActions();
  const auto found = std::find_if(actions.begin(), actions.end(), [method](const RpcAction& entry) {
    return entry.method == method;
  });
  CHECK(found != actions.end());  // an RPC of ours without an entry: a bug, caught by tests
  return *found;
}

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

Peer ServerContextView::PeerOf() const {
  Peer peer;
  peer.address = AddressOfPeer(context_.peer());
  const std::shared_ptr<const grpc::AuthContext> auth = context_.auth_context();
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

identity::Credentials CredentialsOf(const CallView& call, const Peer& peer) {
  identity::Credentials credentials;
  credentials.authorization = call.Metadata("authorization");
  credentials.api_key = call.Metadata("x-api-key");
  if (credentials.api_key.empty()) credentials.api_key = call.Metadata("api-key");
  credentials.peer = &peer;
  return credentials;
}

std::string RequestIdOf(const CallView& call, std::string_view given) {
  if (!given.empty()) return std::string(given);
  const std::string_view sent = call.Metadata("x-request-id");
  const bool sane =
      !sent.empty() && sent.size() <= 128 &&
      std::all_of(sent.begin(), sent.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  if (sane) return std::string(sent);
  return "req_" + TraceContext::Start().TraceId();
}

grpc::Status StatusOf(const policy::AccessRefusal& refusal, std::string_view request_id) {
  return ToGrpcStatus(Status(refusal.ToStatus().code(), refusal.AnswerMessage(request_id)));
}

}  // namespace rampart::api::grpc_access
