#pragma once

// RFC 6962 Merkle trees (§2.1), over SHA-256 or SM3: leaf hash H(0x00 || data), node hash
// H(0x01 || left || right), the empty tree's root H(""). What the audit log commits records to:
//
//   Frontier            the compact range of [0, size): an append-only tree that gives the root
//                       after each append in O(log n) time and memory
//   Leaves              the leaf hashes a proof is computed from, possibly after a pruned prefix
//                       (whose frontier stands in for it)
//   InclusionProof /    RFC 6962 §2.1.1 and §2.1.2 audit paths and consistency proofs, and their
//   ConsistencyProof    verifiers (RFC 9162 §2.1.3.2 and §2.1.4.2), which any RFC 6962
//                       implementation interoperates with
//
// Pure values; thread-compatible. Sizes and indexes are int64_t (a log never nears 2^62).
// Untrusted input (proofs, sizes) yields InvalidArgument, never a crash.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "crypto/digest.h"

namespace rampart::audit {

using crypto::Digest;
using crypto::DigestAlgorithm;

Digest LeafHash(DigestAlgorithm algorithm, std::string_view data);
Digest NodeHash(DigestAlgorithm algorithm, const Digest& left, const Digest& right);
Digest EmptyRoot(DigestAlgorithm algorithm);

// The roots of the perfect subtrees that make up [0, size), largest (leftmost) first: one per
// set bit of size.
class Frontier {
 public:
  explicit Frontier(DigestAlgorithm algorithm) : algorithm_(algorithm) {}
  // InvalidArgument unless `hashes` has one hash per set bit of `size`.
  static Result<Frontier> Make(DigestAlgorithm algorithm, int64_t size, std::vector<Digest> hashes);

  void Append(const Digest& leaf_hash);
  Digest Root() const;  // the tree head of [0, size)
  int64_t size() const { return size_; }
  const std::vector<Digest>& hashes() const { return hashes_; }
  DigestAlgorithm algorithm() const { return algorithm_; }

  // "hex,hex,..." (empty for size 0), and back (InvalidArgument for bad text or count).
  std::string Encode() const;
  static Result<Frontier> Decode(DigestAlgorithm algorithm, int64_t size, std::string_view text);

 private:
  DigestAlgorithm algorithm_;
  int64_t size_ = 0;
  std::vector<Digest> hashes_;
};

// The leaf hashes [base, base + leaves.size()) of a tree, and the frontier of [0, base) standing
// in for a pruned prefix (base 0: the whole tree). Proofs need only nodes of the retained part or
// whole perfect subtrees of the frontier: any leaf >= base, any old size >= base.
struct Leaves {
  explicit Leaves(DigestAlgorithm algorithm) : base(algorithm) {}
  Frontier base;
  std::vector<Digest> leaves;
  int64_t size() const { return base.size() + static_cast<int64_t>(leaves.size()); }
};

// MTH(D[0:size]). InvalidArgument when size > leaves.size() or the pruned prefix is needed.
Result<Digest> RootAt(const Leaves& leaves, int64_t size);
// PATH(index, D[0:size]) of RFC 6962 §2.1.1.
Result<std::vector<Digest>> InclusionProof(const Leaves& leaves, int64_t index, int64_t size);
// PROOF(old_size, D[0:new_size]) of RFC 6962 §2.1.2; empty when old_size is 0 or new_size.
Result<std::vector<Digest>> ConsistencyProof(const Leaves& leaves, int64_t old_size,
                                             int64_t new_size);

// OK when `proof` shows `leaf_hash` at `index` in the tree of `size` whose root is `root`;
// InvalidArgument saying why not.
Status VerifyInclusion(DigestAlgorithm algorithm, int64_t index, int64_t size,
                       const Digest& leaf_hash, std::span<const Digest> proof, const Digest& root);
// OK when `proof` shows that the tree of `old_size` (root `old_root`) is a prefix of the tree of
// `new_size` (root `new_root`).
Status VerifyConsistency(DigestAlgorithm algorithm, int64_t old_size, int64_t new_size,
                         const Digest& old_root, const Digest& new_root,
                         std::span<const Digest> proof);

// The hash chain beside the tree: chain_i = H(chain_{i-1} || leaf_i), chain_0 = 32 zero bytes.
// A single edit breaks the chain exactly at the record edited.
Digest ChainHash(DigestAlgorithm algorithm, const Digest& previous, const Digest& leaf);

// Hex of a digest, and back (InvalidArgument unless 64 hex digits).
std::string HashHex(const Digest& digest);
Result<Digest> ParseHashHex(std::string_view hex);

}  // namespace rampart::audit
