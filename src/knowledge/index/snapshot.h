#pragma once

// Snapshots: an index's live records and its namespaces' graphs as of one log sequence S, in
// `snapshot-<S>.snap` in the index's folder (docs/vector-indexes.md, "Snapshots"). Format 2: a
// header (magic "RPVSNAP1", format version, sealed flag, dimension, metric, S, record count),
// then the graph section, then the records, each as chunks (a 4-byte length and that many
// bytes; a zero length ends them), then the SHA-256 of everything before it. The graph section
// is one byte stream cut into chunks anywhere: per namespace its name, the graph label of each
// of its records (in the order they follow) and the engine's graph (EngineView::graphs). Record
// chunks hold whole entries (namespace, record, knowledge/index/write_codec.h). Format 1 (no
// graph section) is still read. Format 3 (written when a SnapshotExtra is given) adds a tag
// string to the header (what the snapshot was built with) and, after the records, a section of
// its user's own entries (length-prefixed, whole entries per chunk), sealed and digested alike.
//
// Sealed snapshots (a keyring given): each chunk is an envelope (crypto/envelope.h) under the
// keyring key "knowledge:index", whose associated data binds the index's name (tenant), the
// header's digest and the chunk's position (data class), so a chunk moved to another index,
// another snapshot or another place in this one fails to open, and a dropped chunk shows as a
// record count that does not match. Chunks are sealed one at a time (about 4 MiB each), so
// neither writing nor loading holds a whole snapshot in memory.
//
// Threads: the functions are independent; WriteSnapshot reads the view on the calling thread.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "crypto/keyring.h"
#include "knowledge/index/engine.h"

namespace rampart::knowledge {

inline constexpr char kSnapshotKeyName[] = "knowledge:index";

struct SnapshotSealing {
  const crypto::Keyring* keyring = nullptr;  // null: plain snapshots
  std::string index_name;                    // bound into every sealed chunk
  std::string key_name = kSnapshotKeyName;   // the keyring key that seals (a wrapping key)
};

// Data of the snapshot's user carried with the records (format 3): the vector store service
// keeps its files and chunks here (knowledge/hub/vector_store_snapshot.h).
struct SnapshotExtra {
  // What the snapshot was built with (settings that change what the records mean); LoadSnapshot
  // refuses a snapshot with another tag, or one without a tag, with FailedPrecondition before
  // it loads anything.
  std::string tag;
  // WriteSnapshot: called after the records, adds the section's entries through `add`.
  std::function<Status(const std::function<Status(std::string_view entry)>& add)> write;
  // LoadSnapshot: each entry in order, after the records are loaded; its error ends the load.
  std::function<Status(std::string_view entry)> read;
};

struct SnapshotInfo {
  std::string path;
  uint64_t sequence = 0;
  uint64_t record_count = 0;
  // LoadSnapshot: namespaces whose graph was loaded, and those whose graph was rebuilt from the
  // records although the snapshot carried one (logged; no graph at all counts in neither).
  uint64_t graphs_loaded = 0;
  uint64_t graphs_rebuilt = 0;
};

// Writes `view` as the snapshot at `sequence`: a temporary file, fsync, rename, fsync of the
// folder. Unavailable on I/O errors; the keyring's errors when sealing.
Result<SnapshotInfo> WriteSnapshot(const std::string& directory, const EngineView& view,
                                   uint64_t sequence, const EngineOptions& options,
                                   const SnapshotSealing& sealing,
                                   const SnapshotExtra* extra = nullptr);

// Snapshot files in `directory`, newest (highest sequence) first.
std::vector<SnapshotInfo> ListSnapshots(const std::string& directory);

// Checks the snapshot's trailing digest, then loads its records into `engine` (new and empty):
// each namespace with a graph through engine.ImportNamespace, and as upserts (which rebuild the
// graph) those without one, and those whose graph the engine refuses or whose graph section is
// unusable (logged as warnings; counted in graphs_rebuilt). Errors name the file: Internal "corrupt
// snapshot ..." (digest, malformed, record count), InvalidArgument when its dimension or metric
// differ from `options`, the envelope's errors (wrong key, another index's snapshot) as
// InvalidArgument, FailedPrecondition for a sealed snapshot without a keyring or a tag other
// than `extra`'s (the section of a format-3 snapshot is skipped when `extra` is null).
Result<SnapshotInfo> LoadSnapshot(const std::string& path, const EngineOptions& options,
                                  const SnapshotSealing& sealing, IndexEngine& engine,
                                  const SnapshotExtra* extra = nullptr);

// Deletes all but the newest `keep` snapshots, and leftover temporary files.
Status PruneSnapshots(const std::string& directory, size_t keep);

}  // namespace rampart::knowledge
