#!/usr/bin/env python3
"""What a durable append of the audit log's batches costs in SQLite, against a plain file.

The audit log's writer commits each batch as one row of `audit_batches` (a BLOB of the batch's
records) in SQLite's WAL with `synchronous=FULL`, with the pragmas Rampart's store sets
(`cache_size` 16 MiB, `wal_autocheckpoint` 4000 pages). This writes the same batches, of the same
size, two ways in the same run, alternating:

  sqlite  one transaction per batch: INSERT of the row, COMMIT (WAL write and fsync; the WAL
          checkpoint copies the pages into the database file every 4000 pages);
  file    append the blob to a file and fdatasync it: the least any durable append can do.

and reports the CPU time of this process per record (user + system, from getrusage: what the
machine's other load does not change much) and the wall time per record, as medians over the
rounds, and the ratio file / sqlite. The content is random bytes (SQLite does not compress; what
is in the records does not change its work). Uses Python's sqlite3 module, which is the system's
libsqlite3, the library Rampart links. Run it on the disk the data directory is on (--dir).

Usage: bench/audit_store_floor.py [--dir DIR] [--batches 400] [--records-per-batch 300]
                                  [--record-bytes 347] [--rounds 3]
It reports; it does not assert. See docs/benchmarks.md ("The store's write, and what another
store would not change"): in the server, a prototype writing to a file saved nothing measurable.
"""

import argparse
import os
import resource
import sqlite3
import statistics
import tempfile
import time


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write_sqlite(directory, blob, batches, per_batch):
    path = os.path.join(directory, "floor.db")
    database = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "cache_size=-16384",
                   "wal_autocheckpoint=4000"):
        database.execute(f"PRAGMA {pragma}")
    database.execute("CREATE TABLE audit_batches (first_sequence BIGINT NOT NULL PRIMARY KEY, "
                     "last_sequence BIGINT NOT NULL, min_time_unix_ns BIGINT NOT NULL, "
                     "max_time_unix_ns BIGINT NOT NULL, records BYTEA NOT NULL)")
    cpu, wall = cpu_seconds(), time.monotonic()
    for batch in range(batches):
        first = batch * per_batch + 1
        database.execute("BEGIN IMMEDIATE")
        database.execute("INSERT INTO audit_batches VALUES (?, ?, ?, ?, ?)",
                         (first, first + per_batch - 1, batch, batch, blob))
        database.execute("COMMIT")
    cpu, wall = cpu_seconds() - cpu, time.monotonic() - wall
    database.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return cpu, wall


def write_file(directory, blob, batches, _per_batch):
    path = os.path.join(directory, "floor.segment")
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_APPEND, 0o600)
    cpu, wall = cpu_seconds(), time.monotonic()
    for _ in range(batches):
        os.write(fd, blob)
        os.fdatasync(fd)
    cpu, wall = cpu_seconds() - cpu, time.monotonic() - wall
    os.close(fd)
    os.remove(path)
    return cpu, wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=".", help="where to write (the data directory's disk)")
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--records-per-batch", type=int, default=300)
    parser.add_argument("--record-bytes", type=int, default=347)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    blob = os.urandom(args.records_per_batch * args.record_bytes)
    records = args.batches * args.records_per_batch
    results = {"sqlite": [], "file": []}
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="audit-floor-") as directory:
        for round_number in range(1, args.rounds + 1):
            for name, write in (("sqlite", write_sqlite), ("file", write_file)):
                cpu, wall = write(directory, blob, args.batches, args.records_per_batch)
                results[name].append((cpu / records * 1e6, wall / records * 1e6))
                print(f"round {round_number} {name}: cpu {cpu / records * 1e6:.3f} µs/record, "
                      f"wall {wall / records * 1e6:.3f} µs/record")
    print(f"{args.batches} batches of {args.records_per_batch} records of {args.record_bytes} "
          f"bytes, {args.rounds} rounds, in {os.path.abspath(args.dir)}\n")
    print("| store | CPU µs/record | wall µs/record |")
    print("|---|---:|---:|")
    medians = {}
    for name, rows in results.items():
        cpu = statistics.median(row[0] for row in rows)
        wall = statistics.median(row[1] for row in rows)
        medians[name] = (cpu, wall)
        print(f"| {name} | {cpu:.3f} | {wall:.3f} |")
    print(f"\nfile / sqlite: CPU {medians['file'][0] / medians['sqlite'][0]:.2f}, "
          f"wall {medians['file'][1] / medians['sqlite'][1]:.2f}")


if __name__ == "__main__":
    main()
