#include "core/ip_network.h"

#include <gtest/gtest.h>

namespace rampart {
namespace {

TEST(IpNetworkTest, MatchesIpv4Networks) {
  const auto network = IpNetwork::Parse("10.1.2.3/8");
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  EXPECT_TRUE(network->Contains("10.200.0.1"));
  EXPECT_FALSE(network->Contains("11.0.0.1"));
  EXPECT_TRUE(network->Contains("::ffff:10.9.9.9"));
  EXPECT_FALSE(network->Contains("::1"));
  EXPECT_FALSE(network->Contains("not an address"));

  const auto odd = IpNetwork::Parse("192.168.1.128/25");
  ASSERT_TRUE(odd.ok());
  EXPECT_TRUE(odd->Contains("192.168.1.200"));
  EXPECT_FALSE(odd->Contains("192.168.1.127"));
}

TEST(IpNetworkTest, OneAddressIsAWholePrefix) {
  const auto host = IpNetwork::Parse("127.0.0.1");
  ASSERT_TRUE(host.ok());
  EXPECT_TRUE(host->Contains("127.0.0.1"));
  EXPECT_FALSE(host->Contains("127.0.0.2"));
  const auto loopback6 = IpNetwork::Parse("::1");
  ASSERT_TRUE(loopback6.ok());
  EXPECT_TRUE(loopback6->Contains("::1"));
  EXPECT_FALSE(loopback6->Contains("::2"));
}

TEST(IpNetworkTest, MatchesIpv6Networks) {
  const auto network = IpNetwork::Parse("2001:db8::/32");
  ASSERT_TRUE(network.ok());
  EXPECT_TRUE(network->Contains("2001:db8:1::5"));
  EXPECT_FALSE(network->Contains("2001:db9::5"));
  EXPECT_FALSE(network->Contains("10.0.0.1"));
  const auto everything = IpNetwork::Parse("::/0");
  ASSERT_TRUE(everything.ok());
  EXPECT_TRUE(everything->Contains("fe80::1"));
}

TEST(IpNetworkTest, RefusesWhatIsNotANetwork) {
  for (const char* text : {"", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "::/129", "10.0.0",
                           "10.0.0.0/8x", "example.com"}) {
    const auto network = IpNetwork::Parse(text);
    ASSERT_FALSE(network.ok()) << text;
    EXPECT_EQ(network.status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace rampart
