#!/usr/bin/env python3
"""Vector stores through HTTP: ingestion throughput and search latency on a large store.

    bench/kb_search_bench.py --binary build/rampart --repository examples/models \
        [--chunks 100000] [--queries 400]
    bench/kb_search_bench.py --url http://127.0.0.1:8000 ...     (a running server)

Builds text documents from Debian's package descriptions (as bench/kb_eval.py does), each
about `--chunk-bytes` x `--chunks-per-file` long, uploads them through the Files API and adds
them to one vector store in file batches with static chunking of 100 tokens and no overlap (so
the store holds about `--chunks` chunks), then:
  - ingestion: MB of text per second and chunks per second, from the first batch to the last
    file completed (extraction, chunking, embedding with the server's embedding target, both
    indexes, the store);
  - search: `--queries` searches per ranker (keyword, vector, hybrid) one at a time, then with
    `--concurrency` in flight: latency p50/p99 (ms, client side, through HTTP) and queries/s;
    the ratio hybrid / keyword of the p50s is the cost of the vector half (embedding the query
    included).
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
import kb_eval  # noqa: E402

BATCH_FILES = 500


def build_documents(files: int, chunks_per_file: int, chunk_bytes: int,
                    seed: int):
    documents, queries = kb_eval.debian_set(100000, seed)
    paragraphs = [paragraph for _, text in documents for paragraph in text.split("\n\n")
                  if len(paragraph) > 80]
    if not paragraphs:
        raise SystemExit("no package descriptions on this machine to build documents from")
    rng = random.Random(seed)
    built = []
    for index in range(files):
        parts, size = [], 0
        while size < chunks_per_file * chunk_bytes:
            paragraph = rng.choice(paragraphs)
            parts.append(paragraph)
            size += len(paragraph) + 2
        built.append((f"doc-{index:06d}.txt", f"Document {index}\n\n" + "\n\n".join(parts) + "\n"))
    return built, [query for query, _ in queries]


def percentile(values: List[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def search_round(client: kb_eval.Client, store_id: str, queries: List[str], ranker: str,
                 concurrency: int) -> Dict[str, float]:
    def one(query: str) -> float:
        started = time.perf_counter()
        client.call("POST", f"/v1/vector_stores/{store_id}/search",
                    {"query": query, "max_num_results": 10,
                     "ranking_options": {"ranker": ranker}})
        return time.perf_counter() - started

    started = time.perf_counter()
    if concurrency == 1:
        latencies = [one(query) for query in queries]
    else:
        with ThreadPoolExecutor(concurrency) as pool:
            latencies = list(pool.map(one, queries))
    seconds = time.perf_counter() - started
    return {"p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000,
            "queries_per_s": len(latencies) / seconds}


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary")
    parser.add_argument("--repository")
    parser.add_argument("--config", help="default: bench/kb_eval.py's minimal config")
    parser.add_argument("--url")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--chunks", type=int, default=100000)
    parser.add_argument("--chunks-per-file", type=int, default=100)
    parser.add_argument("--chunk-bytes", type=int, default=400, help="about 100 tokens")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--threads", type=int, default=8, help="concurrent uploads")
    parser.add_argument("--ingest-timeout", type=float, default=3600)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    if bool(args.url) == bool(args.binary):
        parser.error("give either --url or --binary (with --repository)")

    files = max(1, args.chunks // args.chunks_per_file)
    documents, queries = build_documents(files, args.chunks_per_file, args.chunk_bytes, args.seed)
    queries = (queries * (args.queries // max(1, len(queries)) + 1))[:args.queries]
    text_bytes = sum(len(text.encode()) for _, text in documents)

    server = None
    work_dir = tempfile.mkdtemp(prefix="rampart-kb-bench-")
    try:
        if args.binary:
            import rampart_e2e as e2e
            server = e2e.Server(args.binary, args.repository,
                                extra_args=["--config", args.config or kb_eval.eval_config(work_dir),
                                            "--data-dir", os.path.join(work_dir, "data")])
            server.start()
            url = f"http://{server.host}:{server.port}"
        else:
            url = args.url
        client = kb_eval.Client(url, args.api_key)
        with ThreadPoolExecutor(args.threads) as pool:
            file_ids = list(pool.map(lambda document: client.upload(*document), documents))
        store = client.call("POST", "/v1/vector_stores", {"name": "kb-search-bench"})
        started = time.monotonic()
        for first in range(0, len(file_ids), BATCH_FILES):
            client.call("POST", f"/v1/vector_stores/{store['id']}/file_batches",
                        {"file_ids": file_ids[first:first + BATCH_FILES],
                         "chunking_strategy": {"type": "static", "static": {
                             "max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}})
        while True:
            counts = client.call("GET", f"/v1/vector_stores/{store['id']}")["file_counts"]
            if counts["in_progress"] == 0 and counts["total"] >= len(file_ids):
                break
            if time.monotonic() - started > args.ingest_timeout:
                raise SystemExit(f"ingestion not done in {args.ingest_timeout:.0f} s: {counts}")
            time.sleep(0.5)
        ingest_s = time.monotonic() - started
        usage = client.call("GET", f"/v1/vector_stores/{store['id']}").get("usage_bytes", 0)
        print(f"store: {len(file_ids)} files, {text_bytes / 1e6:.1f} MB of text, "
              f"{counts['failed']} failed, usage_bytes {usage}")
        print(f"ingestion: {ingest_s:.1f} s, {text_bytes / 1e6 / ingest_s:.2f} MB/s, "
              f"about {args.chunks / ingest_s:.0f} chunks/s")
        for ranker in kb_eval.RANKERS:  # warm each path once
            search_round(client, store["id"], queries[:20], ranker, 1)
        print("| ranker | in flight | p50 ms | p99 ms | queries/s |")
        print("|---|---:|---:|---:|---:|")
        results = {}
        for concurrency in (1, args.concurrency):
            for ranker in kb_eval.RANKERS:
                figures = search_round(client, store["id"], queries, ranker, concurrency)
                results[(ranker, concurrency)] = figures
                print(f"| {ranker} | {concurrency} | {figures['p50_ms']:.2f} | "
                      f"{figures['p99_ms']:.2f} | {figures['queries_per_s']:.0f} |")
        ratio = results[("hybrid", 1)]["p50_ms"] / results[("keyword", 1)]["p50_ms"]
        print(f"hybrid / keyword p50 at 1 in flight: {ratio:.2f}")
        return 0
    finally:
        if server is not None:
            server.stop()
            server.cleanup()
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
