#include "identity/mtls.h"

#include <gtest/gtest.h>

namespace rampart::identity {
namespace {

PeerCertificate Certificate() {
  PeerCertificate certificate;
  certificate.subject = "CN=web.svc.acme.internal,OU=platform,O=Acme";
  certificate.common_name = "web.svc.acme.internal";
  certificate.dns_names = {"Batch.Acme.Internal", "web.svc.acme.internal"};
  certificate.uris = {"https://acme.example/x", "spiffe://acme.internal/ns/prod/sa/web"};
  return certificate;
}

MtlsRule Rule(std::string MtlsRule::*selector, std::string pattern, std::string principal) {
  MtlsRule rule;
  rule.*selector = std::move(pattern);
  rule.tenant = "acme";
  rule.principal = std::move(principal);
  return rule;
}

TEST(MtlsMapperTest, SpiffeRuleMapsTheMatchingUri) {
  const Result<MtlsMapper> mapper = MtlsMapper::Make(
      {Rule(&MtlsRule::spiffe, "spiffe://acme.internal/ns/*/sa/*", "{spiffe_path}")});
  ASSERT_TRUE(mapper.ok()) << mapper.status().ToString();
  const Result<Identity> identity = mapper->Map(Certificate());
  ASSERT_TRUE(identity.ok()) << identity.status().ToString();
  EXPECT_EQ(identity->method, Method::kMtls);
  EXPECT_EQ(identity->tenant, "acme");
  EXPECT_EQ(identity->principal, "ns/prod/sa/web");

  const Result<MtlsMapper> by_uri =
      MtlsMapper::Make({Rule(&MtlsRule::spiffe, "spiffe://acme.internal/ns/*/sa/*", "{uri}")});
  EXPECT_EQ(by_uri->Map(Certificate())->principal, "spiffe://acme.internal/ns/prod/sa/web");
}

TEST(MtlsMapperTest, SpiffeStarDoesNotCrossPathSegments) {
  const Result<MtlsMapper> mapper =
      MtlsMapper::Make({Rule(&MtlsRule::spiffe, "spiffe://acme.internal/ns/*", "{uri}")});
  const Result<Identity> identity = mapper->Map(Certificate());
  EXPECT_EQ(identity.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(identity.status().message(), "client certificate not mapped to a principal");
}

TEST(MtlsMapperTest, CommonNameDnsAndSubjectSelectors) {
  MtlsRule by_cn = Rule(&MtlsRule::subject_cn, "*.svc.acme.internal", "{cn}");
  by_cn.roles = {"service", "reader", "service"};
  const Result<MtlsMapper> cn = MtlsMapper::Make({by_cn});
  const Result<Identity> cn_identity = cn->Map(Certificate());
  ASSERT_TRUE(cn_identity.ok());
  EXPECT_EQ(cn_identity->principal, "web.svc.acme.internal");
  EXPECT_EQ(cn_identity->roles, (std::vector<std::string>{"reader", "service"}));

  // DNS names compare without case.
  const Result<MtlsMapper> dns =
      MtlsMapper::Make({Rule(&MtlsRule::san_dns, "batch.acme.internal", "batch-{dns}")});
  EXPECT_EQ(dns->Map(Certificate())->principal, "batch-Batch.Acme.Internal");

  const Result<MtlsMapper> subject =
      MtlsMapper::Make({Rule(&MtlsRule::subject, "CN=*,OU=platform,O=Acme", "platform")});
  EXPECT_EQ(subject->Map(Certificate())->principal, "platform");
  const Result<MtlsMapper> other_ou =
      MtlsMapper::Make({Rule(&MtlsRule::subject, "CN=*,OU=research,O=Acme", "x")});
  EXPECT_FALSE(other_ou->Map(Certificate()).ok());
}

TEST(MtlsMapperTest, FirstMatchingRuleDecidesAndEmptyTemplatesSkipARule) {
  PeerCertificate no_cn = Certificate();
  no_cn.common_name.clear();
  no_cn.subject = "OU=platform,O=Acme";
  const Result<MtlsMapper> mapper =
      MtlsMapper::Make({Rule(&MtlsRule::san_dns, "web.svc.acme.internal", "{cn}"),
                        Rule(&MtlsRule::san_dns, "*.svc.acme.internal", "second"),
                        Rule(&MtlsRule::subject, "*", "third")});
  // The first rule matches but its principal would be empty: the next rule decides.
  EXPECT_EQ(mapper->Map(no_cn)->principal, "second");
  EXPECT_EQ(mapper->Map(Certificate())->principal, "web.svc.acme.internal");
}

TEST(MtlsMapperTest, MakeRefusesRulesThatCannotWork) {
  MtlsRule none;
  none.tenant = "acme";
  none.principal = "x";
  EXPECT_EQ(MtlsMapper::Make({none}).status().code(), StatusCode::kInvalidArgument);
  MtlsRule two = Rule(&MtlsRule::subject_cn, "a", "x");
  two.san_dns = "b";
  EXPECT_EQ(MtlsMapper::Make({two}).status().code(), StatusCode::kInvalidArgument);
  MtlsRule no_tenant = Rule(&MtlsRule::subject_cn, "a", "x");
  no_tenant.tenant.clear();
  EXPECT_EQ(MtlsMapper::Make({no_tenant}).status().code(), StatusCode::kInvalidArgument);
  const Result<MtlsMapper> unknown =
      MtlsMapper::Make({Rule(&MtlsRule::subject_cn, "a", "{email}")});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("{email}"), std::string::npos)
      << unknown.status().message();
  EXPECT_FALSE(MtlsMapper::Make({Rule(&MtlsRule::subject_cn, "a", "{cn")}).ok());
  EXPECT_FALSE(MtlsMapper::Make({Rule(&MtlsRule::subject_cn, "a", "cn}")}).ok());
  EXPECT_FALSE(MtlsMapper::Make({Rule(&MtlsRule::spiffe, "https://x/*", "{uri}")}).ok());
  EXPECT_TRUE(MtlsMapper::Make({})->empty());
}

}  // namespace
}  // namespace rampart::identity
