#include "knowledge/index/wal.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "core/logging.h"
#include "knowledge/index/durable_files.h"
#include "knowledge/index/write_codec.h"

namespace rampart::knowledge {
namespace {

constexpr std::string_view kSegmentMagic = "RPVWAL01";
constexpr size_t kFrameHeaderBytes = 16;  // length, crc, sequence

std::string SegmentName(uint64_t first_sequence) {
  char name[40];
  std::snprintf(name, sizeof(name), "wal-%020" PRIu64 ".log", first_sequence);
  return name;
}

// The record's CRC covers its sequence number and payload.
uint32_t FrameCrc(uint64_t sequence, std::string_view payload) {
  char bytes[8];
  std::memcpy(bytes, &sequence, 8);
  return Crc32c(payload, Crc32c(std::string_view(bytes, 8)));
}

struct Frame {
  uint64_t sequence = 0;
  std::string_view payload;
  size_t size = 0;  // header + payload
};

// A well-formed frame at `offset` (length in range and within the data, CRC matching), or
// nullopt: the caller decides whether that is a torn tail or damage.
std::optional<Frame> ReadFrame(std::string_view data, size_t offset) {
  if (data.size() - offset < kFrameHeaderBytes) return std::nullopt;
  uint32_t length, crc;
  Frame frame;
  std::memcpy(&length, data.data() + offset, 4);
  std::memcpy(&crc, data.data() + offset + 4, 4);
  std::memcpy(&frame.sequence, data.data() + offset + 8, 8);
  if (length > kMaxWalPayloadBytes || length > data.size() - offset - kFrameHeaderBytes) {
    return std::nullopt;
  }
  frame.payload = data.substr(offset + kFrameHeaderBytes, length);
  if (FrameCrc(frame.sequence, frame.payload) != crc) return std::nullopt;
  frame.size = kFrameHeaderBytes + length;
  return frame;
}

}  // namespace

WriteAheadLog::WriteAheadLog(std::string directory, WalOptions options)
    : directory_(std::move(directory)), options_(options) {}

WriteAheadLog::~WriteAheadLog() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<WriteAheadLog>> WriteAheadLog::Open(const std::string& directory,
                                                           uint64_t after_sequence,
                                                           const WalOptions& options,
                                                           const Replay& replay) {
  std::unique_ptr<WriteAheadLog> log(new WriteAheadLog(directory, options));
  RETURN_IF_ERROR(log->Recover(after_sequence, replay));
  RETURN_IF_ERROR(log->OpenForAppend());
  return log;
}

Status WriteAheadLog::Recover(uint64_t after_sequence, const Replay& replay) {
  DIR* folder = ::opendir(directory_.c_str());
  if (folder == nullptr) return ErrnoStatus("cannot open the index folder", directory_);
  while (const dirent* entry = ::readdir(folder)) {
    uint64_t first = 0;
    char tail = 0;
    if (std::sscanf(entry->d_name, "wal-%20" SCNu64 ".lo%c", &first, &tail) == 2 && tail == 'g' &&
        entry->d_name == SegmentName(first)) {
      segments_.push_back({first, directory_ + "/" + entry->d_name});
    }
  }
  ::closedir(folder);
  std::sort(segments_.begin(), segments_.end(),
            [](const Segment& a, const Segment& b) { return a.first_sequence < b.first_sequence; });
  for (size_t i = 0; i < segments_.size(); ++i) {
    RETURN_IF_ERROR(RecoverSegment(i, i + 1 == segments_.size(), after_sequence, replay));
  }
  // last_sequence_ is now the last record's (0 when none); the snapshot may be newer.
  last_record_ = last_sequence_;
  last_sequence_ = std::max(last_sequence_, after_sequence);
  return Status::Ok();
}

Status WriteAheadLog::RecoverSegment(size_t index, bool last, uint64_t after_sequence,
                                     const Replay& replay) {
  const Segment& segment = segments_[index];
  ASSIGN_OR_RETURN(std::string data, ReadWholeFile(segment.path));
  const auto cut_at = [&](size_t offset, std::string_view why) -> Status {
    LOG_WARN(
        "write-ahead log '{}': {} at offset {}; dropping the {} bytes from there (a write "
        "torn by a crash)",
        segment.path, why, offset, data.size() - offset);
    if (::truncate(segment.path.c_str(), static_cast<off_t>(offset)) != 0) {
      return ErrnoStatus("cannot truncate the torn write-ahead log", segment.path);
    }
    const int fd = ::open(segment.path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("cannot open", segment.path);
    const int synced = ::fsync(fd);
    ::close(fd);
    if (synced != 0) return ErrnoStatus("cannot fsync", segment.path);
    return Status::Ok();
  };
  if (data.size() < kSegmentMagic.size() || data.compare(0, kSegmentMagic.size(), kSegmentMagic)) {
    if (last && kSegmentMagic.starts_with(data)) {
      // Created but its magic not (fully) written when the process died: rewrite it whole.
      LOG_WARN("write-ahead log '{}': incomplete segment header; starting it again", segment.path);
      return WriteFileAtomically(segment.path, kSegmentMagic);
    }
    return Internal("corrupt write-ahead log '{}': it does not start with the segment magic",
                    segment.path);
  }
  size_t offset = kSegmentMagic.size();
  while (offset < data.size()) {
    const std::optional<Frame> frame = ReadFrame(data, offset);
    if (!frame) {
      // Damage: a torn tail only if nothing valid follows, anywhere after it.
      if (!last) {
        return Internal(
            "corrupt write-ahead log '{}' at offset {}: a damaged record, with later "
            "segments after it",
            segment.path, offset);
      }
      for (size_t probe = offset + 1; probe + kFrameHeaderBytes <= data.size(); ++probe) {
        uint64_t sequence;
        std::memcpy(&sequence, data.data() + probe + 8, 8);
        if (sequence <= last_sequence_ || sequence > last_sequence_ + (uint64_t{1} << 32)) {
          continue;
        }
        if (ReadFrame(data, probe)) {
          return Internal(
              "corrupt write-ahead log '{}' at offset {}: a damaged record followed "
              "by a valid one (sequence {} at offset {}); refusing to drop "
              "acknowledged writes",
              segment.path, offset, sequence, probe);
        }
      }
      return cut_at(offset, data.size() - offset < kFrameHeaderBytes ? "a short record header"
                                                                     : "a damaged record");
    }
    // Sequences rise by one; a jump is allowed only into what the snapshot already holds (the
    // log was restarted after it). A segment's first record carries the segment's name.
    const bool starts_segment = offset == kSegmentMagic.size();
    const bool expected =
        frame->sequence > last_sequence_ &&
        (frame->sequence == last_sequence_ + 1 || frame->sequence <= after_sequence + 1) &&
        (!starts_segment || frame->sequence == segment.first_sequence);
    if (!expected) {
      return Internal(
          "corrupt write-ahead log '{}' at offset {}: sequence {} where {} was "
          "expected (a record is missing)",
          segment.path, offset, frame->sequence,
          starts_segment ? segment.first_sequence : last_sequence_ + 1);
    }
    if (frame->sequence > after_sequence) {
      Result<WriteOp> op = DecodeWriteOp(frame->payload);
      if (!op.ok()) {
        return Internal("write-ahead log '{}' at offset {}: record {}: {}", segment.path, offset,
                        frame->sequence, op.status().message());
      }
      RETURN_IF_ERROR(replay(frame->sequence, std::move(*op)));
    }
    last_sequence_ = frame->sequence;
    offset += frame->size;
  }
  return Status::Ok();
}

Status WriteAheadLog::OpenForAppend() {
  // A new segment also when the snapshot is ahead of the last record (a damaged tail lost
  // records the snapshot holds), so the next sequence starts a segment of its own.
  if (segments_.empty() || last_record_ < last_sequence_) {
    return StartSegment(last_sequence_ + 1);
  }
  const Segment& segment = segments_.back();
  fd_ = ::open(segment.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) return ErrnoStatus("cannot open the write-ahead log", segment.path);
  const off_t size = ::lseek(fd_, 0, SEEK_END);
  if (size < 0) return ErrnoStatus("cannot seek in", segment.path);
  segment_size_ = static_cast<size_t>(size);
  return Status::Ok();
}

Status WriteAheadLog::StartSegment(uint64_t first_sequence) {
  Segment segment{first_sequence, directory_ + "/" + SegmentName(first_sequence)};
  RETURN_IF_ERROR(WriteFileAtomically(segment.path, kSegmentMagic));
  const int fd = ::open(segment.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open the write-ahead log", segment.path);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  segment_size_ = kSegmentMagic.size();
  std::lock_guard lock(segments_mutex_);
  if (!segments_.empty() && segments_.back().first_sequence == first_sequence) segments_.pop_back();
  segments_.push_back(std::move(segment));
  return Status::Ok();
}

Result<uint64_t> WriteAheadLog::Append(std::span<const std::string> payloads) {
  RETURN_IF_ERROR(broken_);
  if (payloads.empty()) return last_sequence_;
  if (segment_size_ >= options_.segment_bytes) {
    Status started = StartSegment(last_sequence_ + 1);
    if (!started.ok()) {
      broken_ = started;
      return started;
    }
  }
  std::string frames;
  size_t total = 0;
  for (const std::string& payload : payloads) total += kFrameHeaderBytes + payload.size();
  frames.reserve(total);
  ByteWriter writer(frames);
  uint64_t sequence = last_sequence_;
  for (const std::string& payload : payloads) {
    if (payload.size() > kMaxWalPayloadBytes) {
      return InvalidArgument("a write of {} bytes is over the log's record limit of {}",
                             payload.size(), kMaxWalPayloadBytes);
    }
    ++sequence;
    writer.U32(static_cast<uint32_t>(payload.size()));
    writer.U32(FrameCrc(sequence, payload));
    writer.U64(sequence);
    writer.Bytes(payload);
  }
  const std::string& path = segments_.back().path;
  Status status = WriteAll(fd_, frames, path);
  if (status.ok() && ::fdatasync(fd_) != 0) status = ErrnoStatus("cannot fdatasync", path);
  if (!status.ok()) {
    // Whatever reached the file is not acknowledged; cut it back so a restart does not replay
    // it, and refuse further writes (the file's state is no longer known).
    if (::ftruncate(fd_, static_cast<off_t>(segment_size_)) != 0) {
      LOG_ERROR("write-ahead log '{}': cannot cut back a failed append", path);
    }
    broken_ = Unavailable("the write-ahead log cannot be written: {}", status.message());
    return broken_;
  }
  segment_size_ += frames.size();
  last_sequence_ = sequence;
  return sequence;
}

Status WriteAheadLog::DropThrough(uint64_t sequence) {
  std::vector<std::string> doomed;
  {
    std::lock_guard lock(segments_mutex_);
    size_t dropped = 0;
    while (dropped + 1 < segments_.size() &&
           segments_[dropped + 1].first_sequence - 1 <= sequence) {
      doomed.push_back(segments_[dropped].path);
      ++dropped;
    }
    segments_.erase(segments_.begin(), segments_.begin() + static_cast<ptrdiff_t>(dropped));
  }
  if (doomed.empty()) return Status::Ok();
  for (const std::string& path : doomed) {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("cannot delete", path);
  }
  return SyncDirectory(directory_);
}

std::vector<std::string> WriteAheadLog::SegmentPaths() const {
  std::lock_guard lock(segments_mutex_);
  std::vector<std::string> paths;
  for (const Segment& segment : segments_) paths.push_back(segment.path);
  return paths;
}

}  // namespace rampart::knowledge
