#pragma once

// IP networks in CIDR notation ("10.0.0.0/8", "2001:db8::/32", or one address, "127.0.0.1"),
// and whether an address lies in one. An IPv4-mapped IPv6 address ("::ffff:10.1.2.3") matches
// IPv4 networks. Values; thread-safe to read.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart {

class IpNetwork {
 public:
  // InvalidArgument "not an IP network: '<text>'" when it does not parse or the prefix is too
  // long for the family.
  static Result<IpNetwork> Parse(std::string_view text);

  // Whether `address` (an IP address without a port) is inside. False for text that is not an
  // address.
  bool Contains(std::string_view address) const;

  const std::string& text() const { return text_; }

 private:
  std::array<uint8_t, 16> bytes_{};  // IPv4 in the first 4
  bool v4_ = true;
  int prefix_ = 0;
  std::string text_;
};

}  // namespace rampart
