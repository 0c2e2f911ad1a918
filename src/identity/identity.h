#pragma once

// Identity: who a request comes from, once authenticated, and what it offered to prove it.
// Every front end (KServe HTTP and gRPC, OpenAI, guard, admin, and every later one) turns its
// request into Credentials and asks the same Authenticator (identity/authenticator.h), so all
// APIs authenticate alike.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/peer.h"
#include "store/store.h"

namespace rampart::identity {

enum class Method {
  kAnonymous,  // no credentials, from a source the config lets in anonymously
  kApiKey,     // Authorization: Bearer rk_..., or x-api-key / api-key
  kJwt,        // Authorization: Bearer <JWT>, verified against the JWKS file
  kMtls,       // a verified client certificate mapped to a principal
};
std::string_view MethodName(Method method);  // "anonymous", "api_key", "jwt", "mtls"

// An authenticated caller. Policy decisions and quotas read it; it is a value, made once per
// request (cheap: a few short strings).
struct Identity {
  Method method = Method::kAnonymous;
  std::string tenant;
  std::string principal;
  std::vector<std::string> roles;  // as granted (sorted, unique); inheritance is the policy's
  store::Attributes attributes;    // the principal's, then the token's or mapping's claims
  std::string key_id;              // the API key's id (quotas per key); empty otherwise
  int64_t expires_unix = 0;        // a token's `exp`, a key's expiry; 0 = none
};

// What one request offers, as its front end saw it. Views into the request; valid for the call.
struct Credentials {
  std::string_view authorization;  // the Authorization header's (or gRPC metadata's) value
  std::string_view api_key;        // x-api-key or api-key (Pinecone's clients send "Api-Key")
  const Peer* peer = nullptr;      // the connection's address and client certificate, if any
};

}  // namespace rampart::identity
