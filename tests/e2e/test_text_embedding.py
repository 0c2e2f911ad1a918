#!/usr/bin/env python3
"""The example `text_embedding` model through the real binary and KServe v2 HTTP: every row it
returns has unit length, texts that share words (or Chinese characters) come out closer than
unrelated ones, strings with nothing to embed share one unit vector, malformed UTF-8 and a long
string are served, and strings from concurrent requests batched into one execution get the
answers they get alone.

Standard library only (the model is generate.py's, in the example repository).
Usage: test_text_embedding.py --binary build/rampart --repository examples/models
"""

import argparse
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Dict, List, Sequence, Union

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kserve_tensors as tensors  # noqa: E402
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402

MODEL = "text_embedding"
DIMENSIONS = 64
UNIT_TOLERANCE = 1e-5

# (anchor, a text sharing words or characters with it, an unrelated text).
TRIPLES = [
    ("The cat sat on the mat", "A cat was sitting on the mat", "Stock markets fell sharply today"),
    ("How do I reset my password?", "Password reset help", "The best pizza in Naples"),
    ("我喜欢机器学习", "我喜欢深度学习", "今天股市大跌"),
    ("北京的天气怎么样", "北京今天天气", "我想买一台新电脑"),
    ("Rampart 模型服务器", "Rampart 服务器的性能", "天气很好 the weather is nice"),
]
FEATURELESS = ["", "   ", "!!! ...", "，。！"]

Text = Union[str, bytes]


def embed(client: e2e.Client, texts: Sequence[Text], binary: bool = False) -> List[List[float]]:
    """One infer request of len(texts) strings ([N, 1]); the N embeddings it answers."""
    request = tensors.InferRequest(
        [{"name": "TEXT", "datatype": "BYTES", "shape": [len(texts), 1], "data": list(texts),
          "binary": binary}])
    response = client.infer(MODEL, request)
    check(response.status == 200, f"infer answered {response.status}: {response.body[:300]!r}")
    _, outputs = tensors.decode_infer_response(response)
    embedding = outputs.get("EMBEDDING")
    check(embedding is not None, f"no EMBEDDING output: {list(outputs)}")
    check(embedding["datatype"] == "FP32", f"EMBEDDING datatype {embedding['datatype']}")
    check(embedding["shape"] == [len(texts), DIMENSIONS],
          f"EMBEDDING shape {embedding['shape']}, expected {[len(texts), DIMENSIONS]}")
    data = embedding["data"]
    rows = [data[i * DIMENSIONS:(i + 1) * DIMENSIONS] for i in range(len(texts))]
    for text, row in zip(texts, rows):
        norm = math.sqrt(sum(value * value for value in row))
        check(abs(norm - 1.0) <= UNIT_TOLERANCE, f"{text!r}: norm {norm}, expected 1")
    return rows


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b))  # both have unit length


def test_similarity(server: e2e.Server) -> str:
    client = server.client()
    texts = [text for triple in TRIPLES for text in triple]
    rows = embed(client, texts)
    notes = []
    for index, (anchor, similar, unrelated) in enumerate(TRIPLES):
        close = cosine(rows[3 * index], rows[3 * index + 1])
        far = cosine(rows[3 * index], rows[3 * index + 2])
        check(close > far, f"{anchor!r}: cosine {close:.3f} with {similar!r}, not above "
                           f"{far:.3f} with {unrelated!r}")
        notes.append(f"{close:.2f}>{far:.2f}")
    client.close()
    return f"{len(texts)} rows of unit length; similar vs unrelated cosine {', '.join(notes)}"


def test_featureless(server: e2e.Server) -> str:
    client = server.client()
    rows = embed(client, FEATURELESS + ["ＨＥＬＬＯ", "hello"])
    for text, row in zip(FEATURELESS[1:], rows[1:]):
        check(max(abs(x - y) for x, y in zip(row, rows[0])) <= 1e-6,
              f"{text!r} does not get the empty string's vector")
    check(cosine(rows[-2], rows[-1]) > 1 - 1e-5, "fullwidth ＨＥＬＬＯ differs from hello")
    client.close()
    return "empty, blank and punctuation-only strings share one unit vector; ＨＥＬＬＯ = hello"


def test_malformed_utf8(server: e2e.Server) -> str:
    client = server.client()
    texts: List[Text] = [b"\xff\xfe\x80 abc \xe4\xbd", b"\x80", b"caf\xc3", "abc"]
    rows = embed(client, texts, binary=True)
    check(cosine(rows[0], rows[3]) > 0.3, "the word 'abc' among malformed bytes is lost: "
                                          f"cosine {cosine(rows[0], rows[3]):.3f} with 'abc'")
    client.close()
    return "malformed UTF-8 (binary BYTES input) answered with unit vectors"


def test_long_string(server: e2e.Server) -> str:
    """One 300 kB string (100,000 Chinese characters, a sentence repeated) embeds like the
    sentence: the same characters and pairs, plus the pair across each repetition."""
    client = server.client(timeout=120)
    sentence = "我喜欢机器学习和深度学习"
    long_text = sentence * (100000 // len(sentence))
    rows = embed(client, [long_text, sentence], binary=True)
    similarity = cosine(rows[0], rows[1])
    check(similarity > 0.9, f"cosine {similarity:.3f} between the sentence and its repetition")
    client.close()
    size = len(long_text.encode())
    return f"{size} bytes in one string: cosine {similarity:.2f} with the sentence"


def test_dynamic_batching(server: e2e.Server, work: str, binary: str) -> str:
    """Requests of 1, 1 and 2 strings wait for a preferred batch of 4 strings and run as one
    execution; each gets what it gets alone (from `server`, the unchanged model)."""
    requests: List[List[Text]] = [["hello world"], ["你好，世界"], ["Rampart", ""]]
    client = server.client()
    alone = [embed(client, texts) for texts in requests]
    client.close()

    models = os.path.join(work, "models")
    shutil.copytree(os.path.join(server.repository, MODEL), os.path.join(models, MODEL))
    config_path = os.path.join(models, MODEL, "config.pbtxt")
    with open(config_path) as config:
        text = config.read()
    check("dynamic_batching { }" in text, "the example config has no `dynamic_batching { }`")
    with open(config_path, "w") as config:
        config.write(text.replace(
            "dynamic_batching { }",
            "dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: "
            "30000000 }"))
    batching = e2e.Server(binary, models)
    try:
        batching.start()
        answers: Dict[int, List[List[float]]] = {}
        errors: List[str] = []
        barrier = threading.Barrier(len(requests))

        def worker(index: int) -> None:
            worker_client = batching.client(timeout=60)
            try:
                worker_client.get("/v2/health/live")
                barrier.wait(timeout=30)
                answers[index] = embed(worker_client, requests[index])
            except (E2eError, OSError, threading.BrokenBarrierError) as error:
                errors.append(f"request {index}: {error!r}")
            finally:
                worker_client.close()

        threads = [threading.Thread(target=worker, args=(i,), daemon=True)
                   for i in range(len(requests))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=90)
        check(not errors, f"requests failed: {errors}")
        for index, texts in enumerate(requests):
            for text, got, want in zip(texts, answers[index], alone[index]):
                difference = max(abs(x - y) for x, y in zip(got, want))
                check(difference <= 1e-5, f"{text!r} batched differs by {difference} from alone")
        stats_client = batching.client()
        stats = stats_client.get(f"/v2/models/{MODEL}/stats").json()["model_stats"][0]
        stats_client.close()
        sizes = {int(batch["batch_size"]): batch["compute_infer"]["count"]
                 for batch in stats["batch_stats"]}
        check(sizes == {4: 1}, f"expected one execution of 4 strings, batch_stats {sizes}")
        return "requests of 1, 1 and 2 strings in one execution of 4, each answered as alone"
    finally:
        batching.stop()
        batching.cleanup()


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True, help="the example model repository")
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    work = tempfile.mkdtemp(prefix="rampart-embedding-")
    server = e2e.Server(args.binary, args.repository)
    try:
        server.start()
        tests = [
            ("similar texts closer, unit rows", lambda: test_similarity(server)),
            ("featureless strings", lambda: test_featureless(server)),
            ("malformed UTF-8", lambda: test_malformed_utf8(server)),
            ("long string", lambda: test_long_string(server)),
            ("dynamic batching", lambda: test_dynamic_batching(server, work, args.binary)),
        ]
        for name, test in tests:
            started = time.monotonic()
            try:
                tally.record(f"{name}: {test()}", None, time.monotonic() - started)
            except (E2eError, OSError, KeyError, ValueError) as error:
                tally.record(name, str(error))
        server.stop()
    except (E2eError, OSError) as error:
        tally.record("server", str(error))
    finally:
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
