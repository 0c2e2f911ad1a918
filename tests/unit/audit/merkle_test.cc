// RFC 6962 Merkle trees: the reference vectors of certificate-transparency-go / transparency-dev
// (the empty tree, the 8-leaf tree's roots, audit paths and consistency proofs), then every
// inclusion proof and every consistency proof of every tree up to 64 leaves against a direct
// reference implementation, with corrupted proofs refused, on SHA-256 and SM3, and from a pruned
// prefix's frontier.

#include "audit/merkle.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rampart::audit {
namespace {

using crypto::DigestAlgorithm;

// The leaf inputs of the reference tree (transparency-dev/merkle testonly).
std::vector<std::string> ReferenceInputs() {
  return {std::string(),
          std::string("\x00", 1),
          "\x10",
          "\x20\x21",
          "\x30\x31",
          "\x40\x41\x42\x43",
          "\x50\x51\x52\x53\x54\x55\x56\x57",
          "\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f"};
}

Leaves LeavesOf(DigestAlgorithm algorithm, const std::vector<std::string>& inputs) {
  Leaves leaves(algorithm);
  for (const std::string& input : inputs) leaves.leaves.push_back(LeafHash(algorithm, input));
  return leaves;
}

TEST(MerkleTest, EmptyTreeRootIsTheHashOfNothing) {
  EXPECT_EQ(HashHex(EmptyRoot(DigestAlgorithm::kSha256)),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(HashHex(Frontier(DigestAlgorithm::kSha256).Root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // SM3 of the empty string (GB/T 32905).
  EXPECT_EQ(HashHex(EmptyRoot(DigestAlgorithm::kSm3)),
            "1ab21d8355cfa17f8e61194831e81a8f22bec8c728fefb747ed035eb5082aa2b");
}

TEST(MerkleTest, ReferenceTreeRootsAtEverySize) {
  const std::vector<std::string> roots = {
      "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
      "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
      "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
      "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
      "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
      "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
      "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};
  const Leaves leaves = LeavesOf(DigestAlgorithm::kSha256, ReferenceInputs());
  Frontier frontier(DigestAlgorithm::kSha256);
  for (size_t size = 1; size <= 8; ++size) {
    frontier.Append(leaves.leaves[size - 1]);
    EXPECT_EQ(HashHex(frontier.Root()), roots[size - 1]) << "size " << size;
    auto root = RootAt(leaves, int64_t(size));
    ASSERT_TRUE(root.ok()) << root.status().ToString();
    EXPECT_EQ(HashHex(*root), roots[size - 1]) << "size " << size;
  }
}

TEST(MerkleTest, ReferenceInclusionAndConsistencyProofs) {
  const Leaves leaves = LeavesOf(DigestAlgorithm::kSha256, ReferenceInputs());
  struct Case {
    int64_t a;
    int64_t b;
    std::vector<std::string> proof;
  };
  const std::vector<Case> inclusion = {
      {0, 1, {}},
      {0, 2, {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"}},
      {1, 2, {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"}},
      {2, 3, {"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
      {1,
       5,
       {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
      {0,
       8,
       {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {5,
       8,
       {"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
  };
  for (const Case& c : inclusion) {
    auto proof = InclusionProof(leaves, c.a, c.b);
    ASSERT_TRUE(proof.ok()) << proof.status().ToString();
    std::vector<std::string> hex;
    for (const Digest& d : *proof) hex.push_back(HashHex(d));
    EXPECT_EQ(hex, c.proof) << "leaf " << c.a << " of " << c.b;
  }
  const std::vector<Case> consistency = {
      {1, 1, {}},
      {1,
       8,
       {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {2,
       5,
       {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
      {6,
       8,
       {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
  };
  for (const Case& c : consistency) {
    auto proof = ConsistencyProof(leaves, c.a, c.b);
    ASSERT_TRUE(proof.ok()) << proof.status().ToString();
    std::vector<std::string> hex;
    for (const Digest& d : *proof) hex.push_back(HashHex(d));
    EXPECT_EQ(hex, c.proof) << c.a << " -> " << c.b;
  }
}

// MTH straight from RFC 6962 §2.1, for cross-checking.
Digest ReferenceRoot(DigestAlgorithm algorithm, const std::vector<Digest>& leaves, size_t lo,
                     size_t hi) {
  if (hi == lo) return EmptyRoot(algorithm);
  if (hi - lo == 1) return leaves[lo];
  size_t k = 1;
  while (k * 2 < hi - lo) k *= 2;
  return NodeHash(algorithm, ReferenceRoot(algorithm, leaves, lo, lo + k),
                  ReferenceRoot(algorithm, leaves, lo + k, hi));
}

class MerkleExhaustiveTest : public ::testing::TestWithParam<DigestAlgorithm> {};

TEST_P(MerkleExhaustiveTest, EveryProofOfEveryTreeUpTo64Verifies) {
  const DigestAlgorithm algorithm = GetParam();
  constexpr int64_t kMax = 64;
  Leaves leaves(algorithm);
  for (int64_t i = 0; i < kMax; ++i) {
    leaves.leaves.push_back(LeafHash(algorithm, "leaf " + std::to_string(i)));
  }
  std::vector<Digest> roots = {EmptyRoot(algorithm)};
  Frontier frontier(algorithm);
  for (int64_t size = 1; size <= kMax; ++size) {
    frontier.Append(leaves.leaves[size_t(size - 1)]);
    roots.push_back(frontier.Root());
    ASSERT_EQ(roots.back(), ReferenceRoot(algorithm, leaves.leaves, 0, size_t(size)));
  }
  for (int64_t size = 1; size <= kMax; ++size) {
    for (int64_t index = 0; index < size; ++index) {
      auto proof = InclusionProof(leaves, index, size);
      ASSERT_TRUE(proof.ok()) << proof.status().ToString();
      const Digest& leaf = leaves.leaves[size_t(index)];
      ASSERT_TRUE(VerifyInclusion(algorithm, index, size, leaf, *proof, roots[size_t(size)]).ok())
          << index << " in " << size;
      // Wrong leaf, wrong index, a flipped bit, a hash too many or too few: refused.
      EXPECT_FALSE(
          VerifyInclusion(algorithm, index, size, roots[0], *proof, roots[size_t(size)]).ok());
      if (size > 1) {
        EXPECT_FALSE(
            VerifyInclusion(algorithm, (index + 1) % size, size, leaf, *proof, roots[size_t(size)])
                .ok())
            << index << " in " << size;
        std::vector<Digest> flipped = *proof;
        flipped[size_t(index) % flipped.size()][7] ^= 0x10;
        EXPECT_FALSE(
            VerifyInclusion(algorithm, index, size, leaf, flipped, roots[size_t(size)]).ok());
        std::vector<Digest> shorter(proof->begin(), proof->end() - 1);
        EXPECT_FALSE(
            VerifyInclusion(algorithm, index, size, leaf, shorter, roots[size_t(size)]).ok());
      }
      std::vector<Digest> longer = *proof;
      longer.push_back(leaf);
      EXPECT_FALSE(VerifyInclusion(algorithm, index, size, leaf, longer, roots[size_t(size)]).ok());
    }
    EXPECT_FALSE(VerifyInclusion(algorithm, size, size, roots[0], {}, roots[size_t(size)]).ok());
  }
  for (int64_t new_size = 0; new_size <= kMax; ++new_size) {
    for (int64_t old_size = 0; old_size <= new_size; ++old_size) {
      auto proof = ConsistencyProof(leaves, old_size, new_size);
      ASSERT_TRUE(proof.ok()) << proof.status().ToString();
      const Digest& old_root = roots[size_t(old_size)];
      const Digest& new_root = roots[size_t(new_size)];
      ASSERT_TRUE(VerifyConsistency(algorithm, old_size, new_size, old_root, new_root, *proof).ok())
          << old_size << " -> " << new_size;
      if (old_size == 0) continue;
      if (old_size < new_size) {
        // Another old root (the tree of one leaf more or less), a flipped bit, a dropped hash.
        const Digest& other = roots[size_t(old_size - 1)];
        EXPECT_FALSE(
            VerifyConsistency(algorithm, old_size, new_size, other, new_root, *proof).ok());
        EXPECT_FALSE(
            VerifyConsistency(algorithm, old_size, new_size, old_root, other, *proof).ok());
        for (size_t k = 0; k < proof->size(); ++k) {
          std::vector<Digest> flipped = *proof;
          flipped[k][0] ^= 1;
          EXPECT_FALSE(
              VerifyConsistency(algorithm, old_size, new_size, old_root, new_root, flipped).ok())
              << old_size << " -> " << new_size << " hash " << k;
        }
        std::vector<Digest> shorter(proof->begin(), proof->end() - 1);
        EXPECT_FALSE(
            VerifyConsistency(algorithm, old_size, new_size, old_root, new_root, shorter).ok());
      } else {
        EXPECT_FALSE(VerifyConsistency(algorithm, old_size, new_size, old_root,
                                       roots[size_t(old_size - 1)], *proof)
                         .ok());
      }
    }
  }
}

TEST_P(MerkleExhaustiveTest, ProofsFromAPrunedPrefixMatchTheWholeTree) {
  const DigestAlgorithm algorithm = GetParam();
  constexpr int64_t kMax = 40;
  Leaves whole(algorithm);
  for (int64_t i = 0; i < kMax; ++i) whole.leaves.push_back(LeafHash(algorithm, std::to_string(i)));
  for (int64_t base = 0; base <= kMax; ++base) {
    Leaves pruned(algorithm);
    for (int64_t i = 0; i < base; ++i) pruned.base.Append(whole.leaves[size_t(i)]);
    auto decoded = Frontier::Decode(algorithm, base, pruned.base.Encode());
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    pruned.base = *decoded;
    pruned.leaves.assign(whole.leaves.begin() + base, whole.leaves.end());
    for (int64_t size = std::max<int64_t>(base, 1); size <= kMax; ++size) {
      auto root = RootAt(pruned, size);
      ASSERT_TRUE(root.ok()) << root.status().ToString();
      EXPECT_EQ(*root, *RootAt(whole, size));
      for (int64_t index = base; index < size; ++index) {
        auto proof = InclusionProof(pruned, index, size);
        ASSERT_TRUE(proof.ok()) << base << ": " << index << " in " << size << ": "
                                << proof.status().ToString();
        EXPECT_EQ(*proof, *InclusionProof(whole, index, size));
      }
      for (int64_t old_size = std::max<int64_t>(base, 1); old_size <= size; ++old_size) {
        auto proof = ConsistencyProof(pruned, old_size, size);
        ASSERT_TRUE(proof.ok()) << proof.status().ToString();
        EXPECT_EQ(*proof, *ConsistencyProof(whole, old_size, size));
      }
    }
    if (base > 1) {
      // A leaf of the pruned prefix cannot be proven (its hash is gone), and says so.
      EXPECT_EQ(InclusionProof(pruned, 0, kMax).status().code(), StatusCode::kInvalidArgument);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Digests, MerkleExhaustiveTest,
                         ::testing::Values(DigestAlgorithm::kSha256, DigestAlgorithm::kSm3),
                         [](const ::testing::TestParamInfo<DigestAlgorithm>& param_info) {
                           return std::string(crypto::DigestName(param_info.param));
                         });

TEST(MerkleTest, FrontiersRefuseTheWrongNumberOfHashesOrBadHex) {
  EXPECT_FALSE(Frontier::Decode(DigestAlgorithm::kSha256, 3, std::string(64, 'a')).ok());
  EXPECT_FALSE(Frontier::Decode(DigestAlgorithm::kSha256, 1, std::string(63, 'a')).ok());
  EXPECT_FALSE(Frontier::Decode(DigestAlgorithm::kSha256, 1, std::string(64, 'g')).ok());
  EXPECT_FALSE(Frontier::Decode(DigestAlgorithm::kSha256, 1, std::string(64, 'a') + ",").ok());
  EXPECT_FALSE(Frontier::Decode(DigestAlgorithm::kSha256, -1, "").ok());
  EXPECT_TRUE(Frontier::Decode(DigestAlgorithm::kSha256, 0, "").ok());
  EXPECT_FALSE(InclusionProof(Leaves(DigestAlgorithm::kSha256), 0, 1).ok());
  EXPECT_FALSE(ConsistencyProof(Leaves(DigestAlgorithm::kSha256), 2, 1).ok());
  EXPECT_FALSE(VerifyConsistency(DigestAlgorithm::kSha256, 3, 2, Digest{}, Digest{}, {}).ok());
  EXPECT_FALSE(VerifyConsistency(DigestAlgorithm::kSha256, 1, 2, Digest{}, Digest{}, {}).ok());
  EXPECT_FALSE(VerifyInclusion(DigestAlgorithm::kSha256, -1, 2, Digest{}, {}, Digest{}).ok());
}

}  // namespace
}  // namespace rampart::audit
