#pragma once

// Client certificates (mutual TLS, verified by the TLS layer) mapped to principals. Rules are
// tried in order; the first whose selector matches decides. Templates in `principal`: {cn},
// {uri} (the matching URI SAN), {dns} (the matching DNS SAN), {spiffe_path} (the SPIFFE ID's
// path without the leading '/').

#include <string>
#include <vector>

#include "core/peer.h"
#include "core/status.h"
#include "identity/identity.h"

namespace rampart::identity {

struct MtlsRule {
  // Exactly one selector; globs with * and ?.
  std::string spiffe;      // a URI SAN "spiffe://trust-domain/path"
  std::string subject_cn;  // the subject's common name
  std::string san_dns;     // a DNS SAN
  std::string subject;     // the whole subject, RFC 4514 ("CN=a,O=b")
  std::string tenant;
  std::string principal;  // may use the templates
  std::vector<std::string> roles;
};

class MtlsMapper {
 public:
  // InvalidArgument when a rule has no selector or several, or no tenant or principal.
  static Result<MtlsMapper> Make(std::vector<MtlsRule> rules);
  // Unauthenticated "client certificate not mapped to a principal" when no rule matches.
  Result<Identity> Map(const PeerCertificate& certificate) const;
  bool empty() const { return rules_.empty(); }

 private:
  std::vector<MtlsRule> rules_;
};

}  // namespace rampart::identity
