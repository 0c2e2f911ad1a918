#pragma once

// JWT bearer tokens (RFC 7519, JWS compact form): HS256, RS256 and ES256, verified with keys
// from a JWKS file (RFC 7517) that is re-read when it changes (a background thread stats it
// every jwks_check_period; Verify never touches the disk); a new file that does not parse keeps
// the old keys. `iss`, `aud`, `exp`, `nbf` and `iat` are checked with a bounded clock skew;
// `alg: none` and an algorithm that does not match its key's type are refused.
//
// The signature is checked before any claim, so a forged token learns nothing but "token
// signature invalid". `exp` is required (a bearer token that never expires is refused as "token
// claims incomplete"). A header with `kid` is verified with that key; without one, with the
// only key of the token's algorithm (none, or several: "unknown signing key"). A header or payload
// with a repeated member name, or a `crit` header (no extension is understood), is malformed.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "identity/identity.h"

namespace rampart::identity {

// Which claims become the identity's fields. A claim may be a string; roles may also be an
// array of strings, or one string of names separated by spaces or commas.
struct JwtClaimMapping {
  std::string tenant = "tenant";  // the claim naming the tenant; a claim that is absent
  std::string default_tenant;     // ... falls back to this (empty: the token is refused)
  std::string principal = "sub";
  std::string roles = "roles";
  // attribute name -> claim name (department: dept); absent claims are left out.
  std::vector<std::pair<std::string, std::string>> attributes;
};

struct JwtOptions {
  std::string jwks_file;               // required
  std::string issuer;                  // required: `iss` must equal it
  std::vector<std::string> audiences;  // `aud` must contain one; empty = `aud` not checked
  std::vector<std::string> algorithms{"RS256", "ES256"};  // accepted `alg` values
  int64_t clock_skew_seconds = 60;                        // allowed on exp, nbf and iat, both ways
  size_t max_token_bytes = 8192;
  JwtClaimMapping claims;
  // How often the verifier's thread stats the JWKS file for a change; 0 = no thread (tests:
  // CheckNow only).
  std::chrono::milliseconds jwks_check_period{1000};
};

class JwtVerifier {
 public:
  // Reads the JWKS file now: InvalidArgument "<file>: <reason>" when it cannot be used. Starts
  // the thread that watches the file (unless options.jwks_check_period is 0).
  static Result<std::unique_ptr<JwtVerifier>> Open(JwtOptions options);
  ~JwtVerifier();  // stops the thread

  // Stats the JWKS file and, when it changed, reads it: OK when unchanged or when its keys are
  // now in force; otherwise why it is not used (the previous keys stay). What the thread runs
  // each period. Blocking; thread-safe.
  Status CheckNow();

  // The identity a token stands for, or Unauthenticated with one of: "malformed token",
  // "token expired", "token not yet valid", "token signature invalid", "unsupported token
  // algorithm", "token issuer not accepted", "token audience not accepted", "unknown signing
  // key", "token claims incomplete". Thread-safe; never blocks and never touches the disk (it
  // reads the keys in force).
  Result<Identity> Verify(std::string_view token, int64_t now_unix) const;

 private:
  struct Impl;
  explicit JwtVerifier(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::identity
