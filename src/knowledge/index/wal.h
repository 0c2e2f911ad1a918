#pragma once

// WriteAheadLog: one index's log of writes, in segment files `wal-<first sequence>.log` in the
// index's folder (docs/vector-indexes.md, "Durability"). A segment is the magic "RPVWAL01", then
// records framed as: payload length (4 bytes), CRC-32C of the sequence and payload (4), sequence
// number (8), payload (an encoded WriteOp, knowledge/index/write_codec.h). Sequences start at 1
// and rise by one across segments.
//
// Recovery (Open) checks every frame's length, CRC and sequence. A damaged tail of the last
// segment (a short frame or a bad CRC with no valid record after it: a write torn by a crash) is
// logged and cut off, keeping every record before it. Damage followed by a valid record, damage
// in an earlier segment, or a gap in the sequences is an error naming the file and the offset:
// acknowledged records are never dropped silently.
//
// Threads: Append and the accessors from one writer thread; DropThrough from any thread.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "knowledge/index/vector_types.h"

namespace rampart::knowledge {

struct WalOptions {
  // A new segment is started once the one being written reaches this size.
  size_t segment_bytes = size_t{64} << 20;
};

// A frame's payload may not be larger (a longer length field is damage, not a record).
inline constexpr size_t kMaxWalPayloadBytes = size_t{256} << 20;

class WriteAheadLog {
 public:
  using Replay = std::function<Status(uint64_t sequence, WriteOp op)>;

  // Recovers the log in `directory` (which must exist), calling `replay` in order for every
  // record after `after_sequence` (what the snapshot already holds), then opens it for appending
  // at the sequence after the last record. Errors: Internal "corrupt write-ahead log ..." naming
  // the file and offset; Internal when records after `after_sequence` are missing; what
  // `replay` returns; Unavailable for I/O errors.
  static Result<std::unique_ptr<WriteAheadLog>> Open(const std::string& directory,
                                                     uint64_t after_sequence,
                                                     const WalOptions& options,
                                                     const Replay& replay);
  ~WriteAheadLog();
  WriteAheadLog(const WriteAheadLog&) = delete;
  WriteAheadLog& operator=(const WriteAheadLog&) = delete;

  // Appends one record per payload (sequences last_sequence()+1, ...) with one write and one
  // fdatasync, rotating first when the segment is full. Returns the last sequence written.
  // Unavailable on an I/O error: nothing of the batch counts as written, the log is cut back
  // and every later Append fails too (the index must be reopened).
  Result<uint64_t> Append(std::span<const std::string> payloads);
  uint64_t last_sequence() const { return last_sequence_; }

  // Deletes the segments whose records all have sequences <= `sequence` (a snapshot holds
  // them), never the one being written.
  Status DropThrough(uint64_t sequence);
  // Segment files now, oldest first (for tests and stats).
  std::vector<std::string> SegmentPaths() const;

 private:
  struct Segment {
    uint64_t first_sequence = 0;
    std::string path;
  };
  WriteAheadLog(std::string directory, WalOptions options);
  Status Recover(uint64_t after_sequence, const Replay& replay);
  Status RecoverSegment(size_t index, bool last, uint64_t after_sequence, const Replay& replay);
  Status OpenForAppend();
  Status StartSegment(uint64_t first_sequence);

  const std::string directory_;
  const WalOptions options_;
  mutable std::mutex segments_mutex_;  // guards segments_ (DropThrough vs rotation)
  std::vector<Segment> segments_;      // oldest first; the last is written
  int fd_ = -1;
  size_t segment_size_ = 0;
  uint64_t last_sequence_ = 0;
  uint64_t last_record_ = 0;  // at the end of recovery: the last record's sequence
  Status broken_;
};

}  // namespace rampart::knowledge
