#pragma once

// Authenticator: one request's Credentials -> its Identity, the same way for every API.
//
// Precedence: an API key (Bearer "rk_...", or x-api-key / api-key), then another Bearer token as
// a JWT (when configured), then a mapped client certificate, then anonymous access when the
// peer's address is in one of the anonymous networks. Credentials that are offered but invalid
// never fall back to anonymous: they are refused. Principal records in the store add their
// roles and attributes to JWT and certificate identities (from the key table's snapshot).
//
// Thread-safe; never blocks and never touches the store.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ip_network.h"
#include "core/status.h"
#include "identity/api_keys.h"
#include "identity/identity.h"
#include "identity/jwt.h"
#include "identity/mtls.h"

namespace rampart::identity {

struct AnonymousOptions {
  std::vector<IpNetwork> from;  // empty = no anonymous access
  std::string tenant = "default";
  std::string principal = "anonymous";
  std::vector<std::string> roles;
};

struct AuthenticatorOptions {
  AnonymousOptions anonymous;
  std::optional<JwtOptions> jwt;
  std::vector<MtlsRule> mtls;
};

class Authenticator {
 public:
  // `keys` may be null (no API keys accepted) and must outlive the authenticator.
  // InvalidArgument for options that cannot be used (a JWKS file that does not parse, ...).
  static Result<std::unique_ptr<Authenticator>> Make(AuthenticatorOptions options,
                                                     const ApiKeyTable* keys);
  ~Authenticator();

  // Unauthenticated with a reason safe to show ("no credentials", "invalid API key", ...).
  Result<Identity> Authenticate(const Credentials& credentials, int64_t now_unix) const;

 private:
  struct Impl;
  explicit Authenticator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::identity
