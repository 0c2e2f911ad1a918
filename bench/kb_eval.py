#!/usr/bin/env python3
"""Retrieval quality of Rampart's vector stores: recall@1/5/10 and MRR for keyword (BM25),
vector and hybrid ranking, on labelled sets built from text already on the machine.

    bench/kb_eval.py --binary build/rampart --repository examples/models [--documents 2000]
    bench/kb_eval.py --url http://127.0.0.1:8000 [--api-key KEY] ...   (a running server)

Sets (each query has exactly one relevant document):
  - `debian`: Debian's package descriptions (the installed packages' from `dpkg-query`, and
    those `apt-cache dumpavail` knows with a long description): the one-line synopsis is the
    query, the long description the document. Packages whose long description another package shares (a -dev
    beside its library) are left out, so a query's answer is unambiguous.
  - `chinese`: the Simplified Chinese gettext catalogs under /usr/share/locale/zh_CN: each long
    translated message is a document, and a span of 4 to 10 characters cut from it at a random
    place (inside words as often as not) is its query. This measures how well an analyser finds
    a passage from a fragment of it, which is where word segmentation and character bigrams
    differ. Skipped when no catalog has enough long messages.

Each set is uploaded through the Files API, put into one vector store (file batches of 500),
ingested, then every query is searched once per ranker (`ranking_options.ranker`: keyword,
vector, hybrid). With --binary (and no --config) the script starts a server per setting it
compares: for `debian`, hybrid's fusion (`knowledge.vector_stores.fusion`, `vector_weight`); for
`chinese`, Chinese words, bigrams and both (`chinese_terms`). Prints one table per set and
setting and, with --json FILE, writes the figures.
"""

import argparse
import gettext
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))

RANKERS = ("keyword", "vector", "hybrid")
CUTOFFS = (1, 5, 10)

# A labelled set: (document name, document text) and (query, index of its document).
Documents = List[Tuple[str, str]]
Queries = List[Tuple[str, int]]


# ------------------------------------------------------------------------------------------
# Building the sets


def _parse_stanzas(text: str) -> List[Tuple[str, str]]:
    stanzas = []
    for block in text.split("\n\n"):
        package, description, in_description = "", [], False
        for line in block.splitlines():
            if line.startswith("Package: "):
                package = line[len("Package: "):].strip()
                in_description = False
            elif line.startswith("Description: "):
                description = [line[len("Description: "):]]
                in_description = True
            elif in_description and line.startswith(" "):
                description.append(line)
            else:
                in_description = False
        if package and description:
            stanzas.append((package, "\n".join(description)))
    return stanzas


def _package_stanzas() -> List[Tuple[str, str]]:
    """(package, Description field) of the installed packages (dpkg keeps their long
    descriptions), then of those apt knows whose index carries one (apt's Packages lists carry
    only the synopsis unless Translation-en lists are fetched)."""
    stanzas = []
    commands = [["dpkg-query", "-W", "-f=Package: ${Package}\nDescription: ${Description}\n\n"],
                ["apt-cache", "dumpavail"]]
    for command in commands:
        if shutil.which(command[0]):
            result = subprocess.run(command, capture_output=True, text=True, errors="replace")
            if result.returncode == 0:
                stanzas.extend(_parse_stanzas(result.stdout))
    return stanzas


def debian_set(count: int, seed: int) -> Tuple[Documents, Queries]:
    long_by_package: Dict[str, Tuple[str, str]] = {}
    for package, description in _package_stanzas():
        synopsis, _, rest = description.partition("\n")
        paragraphs = []
        for line in rest.splitlines():
            line = line[1:] if line.startswith(" ") else line
            paragraphs.append("" if line.strip() == "." else line)
        body = re.sub(r"\n{3,}", "\n\n", "\n".join(paragraphs)).strip()
        if len(body) >= 120 and len(synopsis.split()) >= 2:
            long_by_package.setdefault(package, (synopsis.strip(), body))
    shared: Dict[str, int] = {}
    synopses: Dict[str, int] = {}
    for synopsis, body in long_by_package.values():
        shared[body] = shared.get(body, 0) + 1
        synopses[synopsis.lower()] = synopses.get(synopsis.lower(), 0) + 1
    candidates = sorted((package, synopsis, body)
                        for package, (synopsis, body) in long_by_package.items()
                        if shared[body] == 1 and synopses[synopsis.lower()] == 1)
    random.Random(seed).shuffle(candidates)
    chosen = candidates[:count]
    documents = [(f"{package}.txt", f"{package}\n\n{body}\n") for package, _, body in chosen]
    queries = [(synopsis, index) for index, (_, synopsis, _) in enumerate(chosen)]
    return documents, queries


_CJK = re.compile(r"[\u4e00-\u9fff]")


def chinese_set(count: int, seed: int) -> Tuple[Documents, Queries]:
    folder = "/usr/share/locale/zh_CN/LC_MESSAGES"
    messages = set()
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not name.endswith(".mo"):
            continue
        try:
            with open(os.path.join(folder, name), "rb") as catalog:
                translations = gettext.GNUTranslations(catalog)
        except (OSError, gettext.error, UnicodeDecodeError, ValueError):
            continue
        for original, translated in translations._catalog.items():  # noqa: SLF001
            if isinstance(translated, str) and len(_CJK.findall(translated)) >= 40:
                messages.add(re.sub(r"\s+", " ", translated).strip())
    rng = random.Random(seed)
    ordered = sorted(messages)
    rng.shuffle(ordered)
    documents: Documents = []
    queries: Queries = []
    for message in ordered[:count]:
        runs = [match for match in re.finditer(r"[\u4e00-\u9fff]{6,}", message)]
        if not runs:
            continue
        run = rng.choice(runs)
        length = rng.randint(4, min(10, len(run.group())))
        start = rng.randint(run.start(), run.end() - length)
        queries.append((message[start:start + length], len(documents)))
        documents.append((f"zh-{len(documents)}.txt", message + "\n"))
    return documents, queries


# ------------------------------------------------------------------------------------------
# Talking to the server


class Client:
    def __init__(self, url: str, api_key: str) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def call(self, method: str, path: str, body: Optional[dict] = None,
             data: Optional[bytes] = None, content_type: str = "application/json") -> dict:
        if body is not None:
            data = json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers=dict(self.headers))
        if data is not None:
            request.add_header("Content-Type", content_type)
        for attempt in range(50):
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    return json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as error:
                if error.code == 429 and attempt < 49:  # the worker pool is full: back off
                    time.sleep(0.05 * (attempt + 1))
                    continue
                raise RuntimeError(f"{method} {path}: {error.code} {error.read()[:300]!r}")
        raise AssertionError("unreachable")

    def upload(self, name: str, text: str) -> str:
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n"
                f"assistants\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"{name}\"\r\nContent-Type: text/plain\r\n\r\n").encode()
        body += text.encode() + f"\r\n--{boundary}--\r\n".encode()
        answer = self.call("POST", "/v1/files", data=body,
                           content_type=f"multipart/form-data; boundary={boundary}")
        return answer["id"]


def load_store(client: Client, label: str, documents: Documents, threads: int,
               timeout_s: float) -> Tuple[str, List[str], float]:
    """Uploads the documents into a new vector store; returns (store id, file ids, seconds
    from the first batch to every file ingested)."""
    with ThreadPoolExecutor(threads) as pool:
        file_ids = list(pool.map(lambda document: client.upload(*document), documents))
    store = client.call("POST", "/v1/vector_stores", {"name": f"kb-eval-{label}"})
    started = time.monotonic()
    for first in range(0, len(file_ids), 500):
        client.call("POST", f"/v1/vector_stores/{store['id']}/file_batches",
                    {"file_ids": file_ids[first:first + 500]})
    deadline = started + timeout_s
    while True:
        counts = client.call("GET", f"/v1/vector_stores/{store['id']}")["file_counts"]
        if counts["in_progress"] == 0 and counts["total"] >= len(file_ids):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{label}: ingestion not done in {timeout_s:.0f} s: {counts}")
        time.sleep(0.2)
    if counts["failed"]:
        print(f"warning: {label}: {counts['failed']} files failed to ingest", file=sys.stderr)
    return store["id"], file_ids, time.monotonic() - started


def evaluate(client: Client, store_id: str, file_ids: List[str], queries: Queries,
             ranker: str, threads: int) -> Dict[str, float]:
    def rank_of(query: Tuple[str, int]) -> Optional[int]:
        text, document = query
        answer = client.call("POST", f"/v1/vector_stores/{store_id}/search",
                             {"query": text, "max_num_results": max(CUTOFFS),
                              "ranking_options": {"ranker": ranker}})
        for rank, hit in enumerate(answer.get("data", []), start=1):
            if hit.get("file_id") == file_ids[document]:
                return rank
        return None

    started = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        ranks = list(pool.map(rank_of, queries))
    seconds = time.monotonic() - started
    figures = {f"recall@{k}": sum(1 for r in ranks if r is not None and r <= k) / len(ranks)
               for k in CUTOFFS}
    figures["mrr@10"] = sum(1.0 / r for r in ranks if r is not None) / len(ranks)
    figures["queries_per_s"] = len(ranks) / seconds if seconds > 0 else 0.0
    return figures


def print_table(label: str, documents: int, queries: int, ingest_s: float,
                results: Dict[str, Dict[str, float]]) -> None:
    print(f"\n{label}: {documents} documents, {queries} queries, ingested in {ingest_s:.1f} s")
    print("| ranker | recall@1 | recall@5 | recall@10 | MRR@10 | queries/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for ranker, figures in results.items():
        print(f"| {ranker} | {figures['recall@1']:.3f} | {figures['recall@5']:.3f} | "
              f"{figures['recall@10']:.3f} | {figures['mrr@10']:.3f} | "
              f"{figures['queries_per_s']:.0f} |")


# ------------------------------------------------------------------------------------------


def eval_config(work_dir: str, language: str = "english", chinese_terms: str = "both",
                fusion: str = "rrf", vector_weight: float = 1.0) -> str:
    """A config with vector stores on, the example embedding model behind them, and the given
    BM25 analyser and hybrid fusion."""
    path = os.path.join(work_dir, f"kb-eval-{language}-{chinese_terms}-{fusion}-{vector_weight}.yaml")
    with open(path, "w") as config:
        config.write(KB_EVAL_CONFIG.format(language=language, chinese_terms=chinese_terms,
                                           fusion=fusion, vector_weight=vector_weight))
    return path


KB_EVAL_CONFIG = """\
gateway:
  models:
    - name: text-embedding
      local_model: text_embedding
knowledge:
  vector_stores:
    embedding_target: text-embedding
    language: {language}
    chinese_terms: {chinese_terms}
    fusion: {fusion}
    vector_weight: {vector_weight}
"""

# What each set is measured with when this script starts the server: (language, chinese_terms,
# fusion, vector_weight). With --url, the server's own.
VARIANTS = {"debian": [("english", "both", "rrf", 1.0), ("english", "both", "rrf", 0.5),
                       ("english", "both", "linear", 0.5), ("english", "both", "linear", 0.25)],
            "chinese": [("chinese", "words", "rrf", 1.0), ("chinese", "bigrams", "rrf", 1.0),
                        ("chinese", "both", "rrf", 1.0)]}


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", help="start this rampart (with --repository)")
    parser.add_argument("--repository", help="its model repository (needs text_embedding)")
    parser.add_argument("--config", help="the config to start it with (default: a minimal one "
                        "with vector stores on, embedding with the example model)")
    parser.add_argument("--url", help="a running server instead")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--sets", default="debian,chinese")
    parser.add_argument("--documents", type=int, default=2000, help="per set, at most")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--threads", type=int, default=8, help="concurrent requests")
    parser.add_argument("--ingest-timeout", type=float, default=900)
    parser.add_argument("--min-hybrid-recall10", type=float, default=0.0,
                        help="exit non-zero when hybrid recall@10 on `debian` is below this "
                        "(a sanity floor for the test suite, not a benchmark)")
    parser.add_argument("--only-first", action="store_true",
                        help="only each set's first setting (the defaults), as the tests do")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    if bool(args.url) == bool(args.binary):
        parser.error("give either --url or --binary (with --repository)")

    builders = {"debian": debian_set, "chinese": chinese_set}
    labels = [name.strip() for name in args.sets.split(",") if name.strip()]
    for label in labels:
        if label not in builders:
            parser.error(f"unknown set {label!r}: one of {', '.join(builders)}")
    if args.binary and not args.repository:
        parser.error("--binary needs --repository")
    work_dir = tempfile.mkdtemp(prefix="rampart-kb-eval-")
    report = {}
    floor_failed = False
    try:
        for label in labels:
            documents, queries = builders[label](args.documents, args.seed)
            if len(documents) < 20:
                print(f"\n{label}: skipped, only {len(documents)} documents on this machine")
                continue
            variants = VARIANTS[label] if args.binary and not args.config else [None]
            if args.only_first:
                variants = variants[:1]
            for variant in variants:
                name = label if variant is None else f"{label} ({', '.join(map(str, variant))})"
                results, ingest_s = run_set(args, work_dir, variant, label, documents, queries)
                print_table(name, len(documents), len(queries), ingest_s, results)
                report[name] = {"documents": len(documents), "queries": len(queries),
                                "ingest_seconds": ingest_s, "rankers": results}
                if label == "debian" and \
                        results["hybrid"]["recall@10"] < args.min_hybrid_recall10:
                    print(f"hybrid recall@10 {results['hybrid']['recall@10']:.3f} is below the "
                          f"floor {args.min_hybrid_recall10}", file=sys.stderr)
                    floor_failed = True
        if args.json:
            with open(args.json, "w") as out:
                json.dump(report, out, indent=2)
        return 1 if floor_failed else 0
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def run_set(args: argparse.Namespace, work_dir: str, variant: Optional[Tuple[str, str]],
            label: str, documents: Documents, queries: Queries
            ) -> Tuple[Dict[str, Dict[str, float]], float]:
    """Loads one set into a new store (on a server started for `variant` when --binary) and
    measures every ranker on it."""
    server = None
    try:
        if args.binary:
            import rampart_e2e as e2e
            config = args.config or eval_config(work_dir, *variant)
            data_dir = tempfile.mkdtemp(prefix="data-", dir=work_dir)
            server = e2e.Server(args.binary, args.repository,
                                extra_args=["--config", config, "--data-dir", data_dir])
            server.start()
            url = f"http://{server.host}:{server.port}"
        else:
            url = args.url
        client = Client(url, args.api_key)
        store_id, file_ids, ingest_s = load_store(client, label, documents, args.threads,
                                                  args.ingest_timeout)
        return ({ranker: evaluate(client, store_id, file_ids, queries, ranker, args.threads)
                 for ranker in RANKERS}, ingest_s)
    finally:
        if server is not None:
            server.stop()
            server.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
