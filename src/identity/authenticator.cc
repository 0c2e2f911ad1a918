#include "identity/authenticator.h"

#include <algorithm>

#include "core/strings.h"

namespace rampart::identity {
namespace {

std::vector<std::string> SortedUnique(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace

struct Authenticator::Impl {
  AnonymousOptions anonymous;
  std::unique_ptr<JwtVerifier> jwt;  // null when not configured
  MtlsMapper mtls;
  const ApiKeyTable* keys = nullptr;

  Result<Identity> VerifyKey(std::string_view key, int64_t now_unix) const {
    if (keys == nullptr) return Unauthenticated("invalid API key");
    return keys->Verify(key, now_unix);
  }

  // Adds the store's record of a JWT or certificate principal: its roles, and its attributes
  // (merged over its tenant's; the tenant's alone when the store has no such principal) under
  // the token's or mapping's own. A disabled principal is refused.
  Result<Identity> WithPrincipalRecord(Identity identity) const {
    if (keys == nullptr) return identity;
    store::Attributes attributes;
    if (std::optional<store::Principal> record =
            keys->FindPrincipal(identity.tenant, identity.principal)) {
      if (record->disabled) return Unauthenticated("principal disabled");
      identity.roles.insert(identity.roles.end(), record->roles.begin(), record->roles.end());
      identity.roles = SortedUnique(std::move(identity.roles));
      attributes = std::move(record->attributes);
    } else if (std::optional<store::Tenant> tenant = keys->FindTenant(identity.tenant)) {
      attributes = std::move(tenant->attributes);
    }
    for (auto& [name, value] : identity.attributes) attributes[name] = std::move(value);
    identity.attributes = std::move(attributes);
    return identity;
  }
};

Result<std::unique_ptr<Authenticator>> Authenticator::Make(AuthenticatorOptions options,
                                                           const ApiKeyTable* keys) {
  auto impl = std::make_unique<Impl>();
  impl->keys = keys;
  if (!options.anonymous.from.empty() &&
      (options.anonymous.tenant.empty() || options.anonymous.principal.empty())) {
    return InvalidArgument("anonymous access needs a tenant and a principal");
  }
  options.anonymous.roles = SortedUnique(std::move(options.anonymous.roles));
  impl->anonymous = std::move(options.anonymous);
  if (options.jwt) {
    ASSIGN_OR_RETURN(impl->jwt, JwtVerifier::Open(std::move(*options.jwt)));
  }
  ASSIGN_OR_RETURN(impl->mtls, MtlsMapper::Make(std::move(options.mtls)));
  return std::unique_ptr<Authenticator>(new Authenticator(std::move(impl)));
}

Authenticator::Authenticator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Authenticator::~Authenticator() = default;

Result<Identity> Authenticator::Authenticate(const Credentials& credentials,
                                             int64_t now_unix) const {
  std::string_view bearer;
  if (const std::string_view authorization = TrimWhitespace(credentials.authorization);
      !authorization.empty()) {
    const size_t space = std::min(authorization.find(' '), authorization.size());
    if (!EqualsIgnoringCase(authorization.substr(0, space), "Bearer")) {
      return Unauthenticated("unsupported authorization scheme");
    }
    bearer = TrimWhitespace(authorization.substr(space));
    if (bearer.empty()) return Unauthenticated("malformed authorization header");
  }
  const std::string_view api_key = TrimWhitespace(credentials.api_key);

  if (!bearer.empty() && LooksLikeApiKey(bearer)) return impl_->VerifyKey(bearer, now_unix);
  if (!api_key.empty()) return impl_->VerifyKey(api_key, now_unix);
  if (!bearer.empty()) {
    // Without JWT configured, a bearer token can only have been meant as a key (OpenAI's
    // clients send keys this way).
    if (impl_->jwt == nullptr) return Unauthenticated("invalid API key");
    ASSIGN_OR_RETURN(Identity identity, impl_->jwt->Verify(bearer, now_unix));
    return impl_->WithPrincipalRecord(std::move(identity));
  }
  const Peer* peer = credentials.peer;
  if (peer != nullptr && peer->has_certificate && !impl_->mtls.empty()) {
    ASSIGN_OR_RETURN(Identity identity, impl_->mtls.Map(peer->certificate));
    return impl_->WithPrincipalRecord(std::move(identity));
  }
  if (peer != nullptr && !peer->address.empty()) {
    const AnonymousOptions& anonymous = impl_->anonymous;
    for (const IpNetwork& network : anonymous.from) {
      if (!network.Contains(peer->address)) continue;
      Identity identity;
      identity.method = Method::kAnonymous;
      identity.tenant = anonymous.tenant;
      identity.principal = anonymous.principal;
      identity.roles = anonymous.roles;
      return identity;
    }
  }
  return Unauthenticated("no credentials");
}

}  // namespace rampart::identity
