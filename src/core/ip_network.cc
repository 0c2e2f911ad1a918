#include "core/ip_network.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace rampart {
namespace {

// Reads an address into 16 bytes (IPv4 in the first 4, and an IPv4-mapped IPv6 address as
// IPv4); false when it is not one.
bool ReadAddress(std::string_view text, std::array<uint8_t, 16>& bytes, bool& v4) {
  if (text.empty() || text.size() > 45) return false;
  char buffer[46];
  std::memcpy(buffer, text.data(), text.size());
  buffer[text.size()] = '\0';
  bytes.fill(0);
  if (inet_pton(AF_INET, buffer, bytes.data()) == 1) {
    v4 = true;
    return true;
  }
  if (inet_pton(AF_INET6, buffer, bytes.data()) != 1) return false;
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(bytes.data(), kMapped, 12) == 0) {
    std::memmove(bytes.data(), bytes.data() + 12, 4);
    std::memset(bytes.data() + 4, 0, 12);
    v4 = true;
    return true;
  }
  v4 = false;
  return true;
}

}  // namespace

Result<IpNetwork> IpNetwork::Parse(std::string_view text) {
  const auto invalid = [&] { return InvalidArgument("not an IP network: '{}'", text); };
  IpNetwork network;
  network.text_ = std::string(text);
  const size_t slash = text.find('/');
  if (!ReadAddress(text.substr(0, slash), network.bytes_, network.v4_)) return invalid();
  const int bits = network.v4_ ? 32 : 128;
  network.prefix_ = bits;
  if (slash != std::string_view::npos) {
    const std::string_view prefix = text.substr(slash + 1);
    int value = -1;
    const auto [end, error] = std::from_chars(prefix.data(), prefix.data() + prefix.size(), value);
    if (prefix.empty() || error != std::errc() || end != prefix.data() + prefix.size() ||
        value < 0 || value > bits) {
      return invalid();
    }
    network.prefix_ = value;
  }
  // Clear the host bits, so "10.1.2.3/8" means 10.0.0.0/8.
  for (int bit = network.prefix_; bit < 128; ++bit) {
    network.bytes_[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
  }
  return network;
}

bool IpNetwork::Contains(std::string_view address) const {
  std::array<uint8_t, 16> bytes;
  bool v4 = false;
  if (!ReadAddress(address, bytes, v4) || v4 != v4_) return false;
  const int whole = prefix_ / 8;
  if (std::memcmp(bytes.data(), bytes_.data(), whole) != 0) return false;
  const int rest = prefix_ % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xff00u >> rest);
  return (bytes[whole] & mask) == bytes_[whole];
}

}  // namespace rampart
