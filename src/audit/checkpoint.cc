#include "audit/checkpoint.h"

#include <charconv>
#include <vector>

#include <fmt/format.h>

namespace rampart::audit {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view kEmDash = "\xE2\x80\x94";

std::string_view AsText(const Digest& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

Result<int64_t> ParseCount(std::string_view text, std::string_view what) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0 || text.empty() ||
      (text.size() > 1 && text[0] == '0')) {
    return InvalidArgument("checkpoint {} '{}' is not a decimal number", what, text);
  }
  return value;
}

// Splits `text` into lines that each end in '\n'; InvalidArgument when the last does not.
Result<std::vector<std::string_view>> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (end == std::string_view::npos) return InvalidArgument("a checkpoint line lacks its '\\n'");
    lines.push_back(text.substr(0, end));
    text.remove_prefix(end + 1);
  }
  return lines;
}

}  // namespace

std::string CheckpointBody(const Checkpoint& checkpoint) {
  return fmt::format("{}\n{}\n{}\ntime {}\ndigest {}\n", kCheckpointOrigin, checkpoint.tree_size,
                     Base64Encode(AsText(checkpoint.root)), checkpoint.time_unix_ns,
                     crypto::DigestName(checkpoint.digest));
}

Result<Checkpoint> ParseCheckpointBody(std::string_view body) {
  ASSIGN_OR_RETURN(const std::vector<std::string_view> lines, Lines(body));
  if (lines.size() != 5) return InvalidArgument("a checkpoint has 5 lines, not {}", lines.size());
  if (lines[0] != kCheckpointOrigin) {
    return InvalidArgument("checkpoint origin '{}' is not '{}'", lines[0], kCheckpointOrigin);
  }
  Checkpoint checkpoint;
  ASSIGN_OR_RETURN(checkpoint.tree_size, ParseCount(lines[1], "tree size"));
  ASSIGN_OR_RETURN(const std::string root, Base64Decode(lines[2]));
  if (root.size() != checkpoint.root.size()) {
    return InvalidArgument("a checkpoint's root hash is {} bytes, not 32", root.size());
  }
  std::copy(root.begin(), root.end(), checkpoint.root.begin());
  if (!lines[3].starts_with("time ")) return InvalidArgument("checkpoint line 4 is not 'time N'");
  ASSIGN_OR_RETURN(checkpoint.time_unix_ns, ParseCount(lines[3].substr(5), "time"));
  if (!lines[4].starts_with("digest ")) {
    return InvalidArgument("checkpoint line 5 is not 'digest NAME'");
  }
  ASSIGN_OR_RETURN(checkpoint.digest, crypto::ParseDigest(lines[4].substr(7)));
  if (CheckpointBody(checkpoint) != body) {
    return InvalidArgument("the checkpoint is not in canonical form");
  }
  return checkpoint;
}

std::string CheckpointNote(const SignedCheckpoint& signed_checkpoint) {
  return fmt::format("{}\n{} {} {}\n", CheckpointBody(signed_checkpoint.checkpoint), kEmDash,
                     signed_checkpoint.key_id, Base64Encode(signed_checkpoint.signature));
}

Result<SignedCheckpoint> ParseCheckpointNote(std::string_view note) {
  const size_t split = note.find("\n\n");
  if (split == std::string_view::npos) {
    return InvalidArgument("a checkpoint note has no empty line before its signature");
  }
  SignedCheckpoint parsed;
  ASSIGN_OR_RETURN(parsed.checkpoint, ParseCheckpointBody(note.substr(0, split + 1)));
  ASSIGN_OR_RETURN(const std::vector<std::string_view> lines, Lines(note.substr(split + 2)));
  if (lines.size() != 1) return InvalidArgument("a checkpoint note has one signature line");
  std::string_view line = lines[0];
  if (!line.starts_with(kEmDash) || line.size() < kEmDash.size() + 1 ||
      line[kEmDash.size()] != ' ') {
    return InvalidArgument("a signature line starts with '— '");
  }
  line.remove_prefix(kEmDash.size() + 1);
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0) {
    return InvalidArgument("a signature line is '— <key id> <signature>'");
  }
  parsed.key_id = std::string(line.substr(0, space));
  ASSIGN_OR_RETURN(parsed.signature, Base64Decode(line.substr(space + 1)));
  return parsed;
}

Result<SignedCheckpoint> SignCheckpoint(const Checkpoint& checkpoint, const crypto::SigningKey& key,
                                        std::string key_id) {
  SignedCheckpoint signed_checkpoint{.checkpoint = checkpoint, .key_id = std::move(key_id)};
  ASSIGN_OR_RETURN(signed_checkpoint.signature, key.Sign(CheckpointBody(checkpoint)));
  return signed_checkpoint;
}

Status VerifyCheckpoint(const SignedCheckpoint& signed_checkpoint,
                        const crypto::VerifyingKey& key) {
  if (!key.Verify(CheckpointBody(signed_checkpoint.checkpoint), signed_checkpoint.signature)) {
    return PermissionDenied("the signature of checkpoint {} does not verify with key {}",
                            signed_checkpoint.checkpoint.tree_size, signed_checkpoint.key_id);
  }
  return Status::Ok();
}

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  const auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(n >> shift) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t n = at(i) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t n = at(i) << 16 | at(i + 1) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return InvalidArgument("base64 text's length is not a multiple of 4");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t n = 0;
    int padding = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && i + 4 == text.size() && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++padding;
        n <<= 6;
        continue;
      }
      const size_t value = kAlphabet.find(c);
      if (value == std::string_view::npos || padding > 0) {
        return InvalidArgument("'{}' is not base64", text.substr(0, 16));
      }
      n = n << 6 | static_cast<uint32_t>(value);
    }
    out += static_cast<char>(n >> 16);
    if (padding < 2) out += static_cast<char>((n >> 8) & 0xFF);
    if (padding < 1) out += static_cast<char>(n & 0xFF);
  }
  if (Base64Encode(out) != text) return InvalidArgument("base64 text is not canonical");
  return out;
}

}  // namespace rampart::audit
