#include "audit/merkle.h"

#include <bit>

namespace rampart::audit {
namespace {

// The largest power of two smaller than n (n >= 2).
int64_t SplitPoint(int64_t n) { return int64_t{1} << (std::bit_width(uint64_t(n - 1)) - 1); }

// MTH(D[lo:hi]) for 0 <= lo < hi <= leaves.size().
Result<Digest> RangeHash(const Leaves& tree, int64_t lo, int64_t hi) {
  const int64_t base = tree.base.size();
  if (lo >= base) {
    Frontier range(tree.base.algorithm());
    for (int64_t i = lo; i < hi; ++i) range.Append(tree.leaves[size_t(i - base)]);
    return range.Root();
  }
  // A node of the pruned prefix: one of the frontier's perfect subtrees, or made of them.
  int64_t start = 0;
  size_t index = 0;
  for (int bit = 62; bit >= 0; --bit) {
    if ((base & (int64_t{1} << bit)) == 0) continue;
    const int64_t end = start + (int64_t{1} << bit);
    if (start == lo && end == hi) return tree.base.hashes()[index];
    start = end;
    ++index;
  }
  if (hi - lo == 1 || hi <= base) {
    return InvalidArgument("the proof needs records [{}, {}) of a pruned epoch", lo, hi);
  }
  const int64_t k = SplitPoint(hi - lo);
  ASSIGN_OR_RETURN(const Digest left, RangeHash(tree, lo, lo + k));
  ASSIGN_OR_RETURN(const Digest right, RangeHash(tree, lo + k, hi));
  return NodeHash(tree.base.algorithm(), left, right);
}

Status Path(const Leaves& tree, int64_t index, int64_t lo, int64_t hi, std::vector<Digest>& proof) {
  if (hi - lo == 1) return Status::Ok();
  const int64_t k = SplitPoint(hi - lo);
  if (index < lo + k) {
    RETURN_IF_ERROR(Path(tree, index, lo, lo + k, proof));
    ASSIGN_OR_RETURN(const Digest sibling, RangeHash(tree, lo + k, hi));
    proof.push_back(sibling);
  } else {
    RETURN_IF_ERROR(Path(tree, index, lo + k, hi, proof));
    ASSIGN_OR_RETURN(const Digest sibling, RangeHash(tree, lo, lo + k));
    proof.push_back(sibling);
  }
  return Status::Ok();
}

// SUBPROOF(m, D[lo:hi], b) of RFC 6962 §2.1.2, m counted from lo.
Status SubProof(const Leaves& tree, int64_t m, int64_t lo, int64_t hi, bool complete,
                std::vector<Digest>& proof) {
  if (m == hi - lo) {
    if (complete) return Status::Ok();
    ASSIGN_OR_RETURN(const Digest node, RangeHash(tree, lo, hi));
    proof.push_back(node);
    return Status::Ok();
  }
  const int64_t k = SplitPoint(hi - lo);
  if (m <= k) {
    RETURN_IF_ERROR(SubProof(tree, m, lo, lo + k, complete, proof));
    ASSIGN_OR_RETURN(const Digest right, RangeHash(tree, lo + k, hi));
    proof.push_back(right);
  } else {
    RETURN_IF_ERROR(SubProof(tree, m - k, lo + k, hi, false, proof));
    ASSIGN_OR_RETURN(const Digest left, RangeHash(tree, lo, lo + k));
    proof.push_back(left);
  }
  return Status::Ok();
}

// Right-shifts fn and sn together until fn's lowest bit is set or fn is 0.
void ShiftWhileEven(uint64_t& fn, uint64_t& sn) {
  while ((fn & 1) == 0 && fn != 0) {
    fn >>= 1;
    sn >>= 1;
  }
}

std::string_view View(const Digest& digest) {
  return std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size());
}

}  // namespace

Digest LeafHash(DigestAlgorithm algorithm, std::string_view data) {
  return crypto::HashParts(algorithm, {std::string_view("\x00", 1), data});
}

Digest NodeHash(DigestAlgorithm algorithm, const Digest& left, const Digest& right) {
  return crypto::HashParts(algorithm, {std::string_view("\x01", 1), View(left), View(right)});
}

Digest EmptyRoot(DigestAlgorithm algorithm) { return crypto::Hash(algorithm, ""); }

Digest ChainHash(DigestAlgorithm algorithm, const Digest& previous, const Digest& leaf) {
  return crypto::HashParts(algorithm, {View(previous), View(leaf)});
}

Result<Frontier> Frontier::Make(DigestAlgorithm algorithm, int64_t size,
                                std::vector<Digest> hashes) {
  if (size < 0 || std::popcount(uint64_t(size)) != static_cast<int>(hashes.size())) {
    return InvalidArgument("a frontier of tree size {} has {} hashes, not {}", size,
                           size < 0 ? 0 : std::popcount(uint64_t(size)), hashes.size());
  }
  Frontier frontier(algorithm);
  frontier.size_ = size;
  frontier.hashes_ = std::move(hashes);
  return frontier;
}

void Frontier::Append(const Digest& leaf_hash) {
  Digest carry = leaf_hash;
  for (uint64_t size = uint64_t(size_); (size & 1) != 0; size >>= 1) {
    carry = NodeHash(algorithm_, hashes_.back(), carry);
    hashes_.pop_back();
  }
  hashes_.push_back(carry);
  ++size_;
}

Digest Frontier::Root() const {
  if (hashes_.empty()) return EmptyRoot(algorithm_);
  Digest root = hashes_.back();
  for (size_t i = hashes_.size() - 1; i-- > 0;) root = NodeHash(algorithm_, hashes_[i], root);
  return root;
}

std::string Frontier::Encode() const {
  std::string text;
  for (const Digest& hash : hashes_) {
    if (!text.empty()) text += ',';
    text += HashHex(hash);
  }
  return text;
}

Result<Frontier> Frontier::Decode(DigestAlgorithm algorithm, int64_t size, std::string_view text) {
  std::vector<Digest> hashes;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    ASSIGN_OR_RETURN(const Digest hash, ParseHashHex(text.substr(0, comma)));
    hashes.push_back(hash);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return InvalidArgument("a frontier ends with ','");
  }
  return Make(algorithm, size, std::move(hashes));
}

Result<Digest> RootAt(const Leaves& leaves, int64_t size) {
  if (size == leaves.base.size()) return leaves.base.Root();
  if (size < leaves.base.size() || size > leaves.size()) {
    return InvalidArgument("no tree of size {}: the records held are [{}, {})", size,
                           leaves.base.size(), leaves.size());
  }
  return RangeHash(leaves, 0, size);
}

Result<std::vector<Digest>> InclusionProof(const Leaves& leaves, int64_t index, int64_t size) {
  if (size < 1 || size > leaves.size() || index < 0 || index >= size) {
    return InvalidArgument("no leaf {} in a tree of size {} (the log holds {})", index, size,
                           leaves.size());
  }
  std::vector<Digest> proof;
  RETURN_IF_ERROR(Path(leaves, index, 0, size, proof));
  return proof;
}

Result<std::vector<Digest>> ConsistencyProof(const Leaves& leaves, int64_t old_size,
                                             int64_t new_size) {
  if (old_size < 0 || old_size > new_size || new_size > leaves.size()) {
    return InvalidArgument("no consistency proof from size {} to {} (the log holds {})", old_size,
                           new_size, leaves.size());
  }
  std::vector<Digest> proof;
  if (old_size == 0 || old_size == new_size) return proof;
  RETURN_IF_ERROR(SubProof(leaves, old_size, 0, new_size, true, proof));
  return proof;
}

Status VerifyInclusion(DigestAlgorithm algorithm, int64_t index, int64_t size,
                       const Digest& leaf_hash, std::span<const Digest> proof, const Digest& root) {
  if (index < 0 || size < 1 || index >= size) {
    return InvalidArgument("leaf index {} is outside a tree of size {}", index, size);
  }
  uint64_t fn = uint64_t(index);
  uint64_t sn = uint64_t(size - 1);
  Digest hash = leaf_hash;
  for (const Digest& sibling : proof) {
    if (sn == 0) return InvalidArgument("the inclusion proof is too long");
    if ((fn & 1) != 0 || fn == sn) {
      hash = NodeHash(algorithm, sibling, hash);
      ShiftWhileEven(fn, sn);
    } else {
      hash = NodeHash(algorithm, hash, sibling);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return InvalidArgument("the inclusion proof is too short");
  if (hash != root) {
    return InvalidArgument("the inclusion proof leads to root {}, not {}", HashHex(hash),
                           HashHex(root));
  }
  return Status::Ok();
}

Status VerifyConsistency(DigestAlgorithm algorithm, int64_t old_size, int64_t new_size,
                         const Digest& old_root, const Digest& new_root,
                         std::span<const Digest> proof) {
  if (old_size < 0 || new_size < old_size) {
    return InvalidArgument("no consistency from size {} to {}", old_size, new_size);
  }
  if (old_size == new_size) {
    if (!proof.empty()) return InvalidArgument("a proof between equal sizes must be empty");
    if (old_root != new_root) return InvalidArgument("two roots of one size differ");
    return Status::Ok();
  }
  if (old_size == 0) {
    if (!proof.empty()) return InvalidArgument("a proof from the empty tree must be empty");
    return Status::Ok();
  }
  if (proof.empty()) return InvalidArgument("the consistency proof is empty");
  std::vector<Digest> path;
  if (std::has_single_bit(uint64_t(old_size))) path.push_back(old_root);
  path.insert(path.end(), proof.begin(), proof.end());
  uint64_t fn = uint64_t(old_size - 1);
  uint64_t sn = uint64_t(new_size - 1);
  while ((fn & 1) != 0) {
    fn >>= 1;
    sn >>= 1;
  }
  Digest old_hash = path[0];
  Digest new_hash = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    if (sn == 0) return InvalidArgument("the consistency proof is too long");
    if ((fn & 1) != 0 || fn == sn) {
      old_hash = NodeHash(algorithm, path[i], old_hash);
      new_hash = NodeHash(algorithm, path[i], new_hash);
      ShiftWhileEven(fn, sn);
    } else {
      new_hash = NodeHash(algorithm, new_hash, path[i]);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return InvalidArgument("the consistency proof is too short");
  if (old_hash != old_root) return InvalidArgument("the proof does not lead to the old root");
  if (new_hash != new_root) return InvalidArgument("the proof does not lead to the new root");
  return Status::Ok();
}

std::string HashHex(const Digest& digest) { return crypto::ToHex(digest); }

Result<Digest> ParseHashHex(std::string_view hex) {
  if (hex.size() != 64) return InvalidArgument("a hash is 64 hex digits, not {}", hex.size());
  ASSIGN_OR_RETURN(const std::string bytes, crypto::FromHex(hex));
  Digest digest;
  std::copy(bytes.begin(), bytes.end(), digest.begin());
  return digest;
}

}  // namespace rampart::audit
