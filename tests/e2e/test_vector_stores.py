#!/usr/bin/env python3
"""Per-document access and bad files in the Vector Stores API (the real binary).

    /usr/bin/python3 tests/e2e/test_vector_stores.py --binary build/rampart \
        --repository examples/models

Starts rampart with an access: section, the gateway's local text-embedding target and
knowledge.vector_stores, and two principals of one tenant whose `department` attributes differ
(sales, legal), under a policy that lets a reader `files:read` only documents of its department.
One store holds five files: two of sales, one of legal (each mentioning "pricing"), a broken PDF
and a 0-byte file. Checks:
  - the broken PDF and the empty file end "failed" with a last_error; the others "completed";
    each principal's list of the store's files, and the store's and batch's file_counts, hold
    only its department's;
  - the same search by each principal finds only its department's documents: a refused document
    contributes no hit, no score and takes no place in max_num_results;
  - a principal with no vector_stores rule is refused (403), no key is 401;
  - a chat completion with model "kb:<store>" (the chat model a fake OpenAI upstream) answers
    with citations and search_results of the caller's documents only, and the model's prompt
    holds them as numbered sources and nothing of the documents the caller may not read;
  - deleting a file through the Files API removes it from the store's search;
  - a contractor, whose grant for vector stores carries the obligation redact:pii, puts a
    document holding a Chinese mobile number and an email in a store of its own: its chunks and
    search hits hold them redacted (masked and hashed by the guard), never as written;
  - a restart loads the stores' index snapshots from <data-dir>/vector-stores and answers the
    same search the same.
Prints one line per check and ends with "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from fake_openai_upstream import FakeUpstream  # noqa: E402
from gateway_harness import small_repository  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402

BOUNDARY = "----rampart-vs-e2e-5c1a"

POLICY = """
roles:
  - name: reader
  - name: outsider
  - name: contractor
rules:
  - id: contractor-files
    effect: permit
    principal: {role: contractor}
    action: [files:create, files:read]
    resource: {type: file}
  - id: contractor-stores
    effect: permit
    principal: {role: contractor}
    action: ["vector_stores:*"]
    resource: {type: vector_store}
    obligations: [redact:pii]
  - id: files
    effect: permit
    principal: {role: reader}
    action: [files:create, files:delete]
    resource: {type: file}
  - id: stores
    effect: permit
    principal: {role: reader}
    action: ["vector_stores:*"]
    resource: {type: vector_store}
  - id: own-department
    effect: permit
    principal: {role: reader}
    action: files:read
    resource: {type: file}
    when:
      - resource.department == principal.department
  - id: ask-the-knowledge-base
    effect: permit
    principal: {role: reader}
    action: chat:create
    resource: {type: model, name: "kb:*"}
  - id: everyone-reads-the-server
    effect: permit
    action: server:read
"""

DOCUMENTS = {
    "sales-pricing.txt": ("sales", b"Sales pricing sheet: the pricing of the premium plan is "
                                   b"discussed with every customer before renewal.\n"),
    "sales-notes.md": ("sales", b"# Pricing notes\n\nRegional pricing for the sales team, "
                                b"with pricing tiers for small offices.\n"),
    "legal-pricing.txt": ("legal", b"Legal review of pricing clauses: the pricing terms in the "
                                   b"contract must name the currency.\n"),
    "broken.pdf": ("sales", b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 9 0 R >>\nthis is "
                            b"not a PDF at all\n"),
    "empty.txt": ("sales", b""),
}


def multipart(filename: str, content: bytes) -> bytes:
    return (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n"
            f"assistants\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            ).encode() + content + f"\r\n--{BOUNDARY}--\r\n".encode()


def run(args) -> int:
    temp = tempfile.mkdtemp(prefix="rampart-vs-e2e-")
    data_dir = os.path.join(temp, "data")
    repository = small_repository(args.repository, temp)
    policy = os.path.join(temp, "policy.yaml")
    with open(policy, "w") as out:
        out.write(POLICY)
    # The chat model of answers with citations: a fake OpenAI upstream that records what it got.
    chat = FakeUpstream(name="chat", answer="Premium pricing is discussed before renewal [1].")
    chat.start()
    config = os.path.join(temp, "rampart.yaml")
    with open(config, "w") as out:
        out.write(f"access:\n  policy_files: [{policy}]\n"
                  f"gateway:\n  upstreams:\n    - {{name: fake, url: '{chat.url}'}}\n"
                  "  models:\n    - name: text-embedding\n"
                  "      local_model: text_embedding\n"
                  "    - name: chat\n      endpoints: [{upstream: fake, model: fake-model}]\n"
                  "  knowledge: {target: chat, score_threshold: 0.0}\n"
                  "knowledge:\n  vector_stores:\n    embedding_target: text-embedding\n"
                  "    ingestion_workers: 2\n")

    def rampart(*arguments: str) -> str:
        done = subprocess.run([args.binary, *arguments, "--data-dir", data_dir],
                              capture_output=True, text=True, timeout=60)
        check(done.returncode == 0, f"rampart {' '.join(arguments)}: {done.stderr}")
        return done.stdout.strip()

    tally = e2e.Tally()
    step = tally.step

    keys = {}
    rampart("tenants", "create", "acme")
    for name, department in (("sam", "sales"), ("lee", "legal")):
        rampart("principals", "put", "acme", name, "--role", "reader", "--attr",
                f"department={department}")
        keys[name] = rampart("keys", "create", "--tenant", "acme", "--name", name,
                             "--principal", name)
    keys["out"] = rampart("keys", "create", "--tenant", "acme", "--name", "out", "--role",
                          "outsider")
    rampart("principals", "put", "acme", "cat", "--role", "contractor")
    keys["cat"] = rampart("keys", "create", "--tenant", "acme", "--name", "cat", "--principal",
                          "cat")
    server = e2e.Server(args.binary, repository, ["--config", config, "--data-dir", data_dir])
    try:
        server.start()
        client = server.client()

        def call(method: str, path: str, key: str, document=None, body: bytes = None,
                 content_type: str = "application/json"):
            headers = {"content-type": content_type}
            if key:
                headers["authorization"] = f"Bearer {key}"
            if document is not None:
                body = json.dumps(document).encode()
            response = client.request(method, path, body, headers)
            return response

        state = {}

        def ingest():
            ids = {}
            for filename, (department, content) in DOCUMENTS.items():
                uploaded = call("POST", "/v1/files", keys["sam"], body=multipart(filename, content),
                                content_type=f"multipart/form-data; boundary={BOUNDARY}")
                check(uploaded.status == 200, f"upload {filename}: {uploaded!r}")
                ids[filename] = uploaded.json()["id"]
            created = call("POST", "/v1/vector_stores", keys["sam"], {"name": "pricing"})
            check(created.status == 200, f"create: {created!r}")
            store = created.json()["id"]
            batch = call("POST", f"/v1/vector_stores/{store}/file_batches", keys["sam"],
                         {"files": [{"file_id": ids[name],
                                     "attributes": {"department": DOCUMENTS[name][0]}}
                                    for name in DOCUMENTS]})
            check(batch.status == 200, f"batch: {batch!r}")
            deadline = time.monotonic() + 90
            while True:
                got = call("GET", f"/v1/vector_stores/{store}", keys["sam"])
                check(got.status == 200, f"retrieve: {got!r}")
                counts = got.json()["file_counts"]
                # sam counts only what sam may read: the four files of sales.
                if counts["total"] == len(DOCUMENTS) - 1 and counts["in_progress"] == 0:
                    break
                check(time.monotonic() < deadline, f"still ingesting: {counts}")
                time.sleep(0.2)
            check(counts["completed"] == 2 and counts["failed"] == 2, f"sam's counts {counts}")
            lee_counts = call("GET", f"/v1/vector_stores/{store}", keys["lee"]).json()["file_counts"]
            check(lee_counts["total"] == 1 and lee_counts["completed"] == 1,
                  f"lee's counts {lee_counts}")
            batch_counts = call("GET", f"/v1/vector_stores/{store}/file_batches/"
                                f"{batch.json()['id']}", keys["lee"]).json()["file_counts"]
            check(batch_counts["total"] == 1, f"lee's batch counts {batch_counts}")
            # Each principal's list holds only the files of its department.
            files = {}
            for key in ("sam", "lee"):
                listed = call("GET", f"/v1/vector_stores/{store}/files?limit=100", keys[key])
                check(listed.status == 200, f"list: {listed!r}")
                files.update({item["id"]: item for item in listed.json()["data"]})
                departments = {item["attributes"]["department"] for item in listed.json()["data"]}
                check(departments == ({"sales"} if key == "sam" else {"legal"}),
                      f"{key} lists {departments}")
            check(len(files) == len(DOCUMENTS), f"listed {files}")
            state.update(store=store, ids=ids)
            for name in ("broken.pdf", "empty.txt"):
                item = files[ids[name]]
                check(item["status"] == "failed" and item["last_error"] and
                      item["last_error"]["code"] in ("invalid_file", "unsupported_file") and
                      item["last_error"]["message"], f"{name}: {item}")
            for name in ("sales-pricing.txt", "sales-notes.md", "legal-pricing.txt"):
                check(files[ids[name]]["status"] == "completed", f"{name}: {files[ids[name]]}")
            return (f"3 completed; broken.pdf {files[ids['broken.pdf']]['last_error']['code']}, "
                    f"empty.txt {files[ids['empty.txt']]['last_error']['code']}")

        step("bad files fail with last_error while the others complete", ingest)

        def search(key: str, query: str, **options):
            answer = call("POST", f"/v1/vector_stores/{state['store']}/search", key,
                          {"query": query, **options})
            check(answer.status == 200, f"search: {answer!r}")
            return answer.json()["data"]

        def per_document():
            ids = state["ids"]
            by_id = {file_id: name for name, file_id in ids.items()}
            sam = search(keys["sam"], "pricing", max_num_results=10)
            lee = search(keys["lee"], "pricing", max_num_results=10)
            sam_files = {by_id[hit["file_id"]] for hit in sam}
            lee_files = {by_id[hit["file_id"]] for hit in lee}
            check(sam_files == {"sales-pricing.txt", "sales-notes.md"}, f"sam sees {sam_files}")
            check(lee_files == {"legal-pricing.txt"}, f"lee sees {lee_files}")
            check(all(hit["attributes"]["department"] == "legal" for hit in lee), f"{lee}")
            # A refused document takes no place: one result for lee is its own, not a sales one.
            top = search(keys["lee"], "pricing premium plan sales", max_num_results=1)
            check(len(top) == 1 and by_id[top[0]["file_id"]] == "legal-pricing.txt",
                  f"lee's top {top}")
            # Keyword ranking alone: lee's only hit is scored among what lee may read.
            keyword = search(keys["lee"], "pricing", ranking_options={"ranker": "keyword"})
            check([by_id[hit["file_id"]] for hit in keyword] == ["legal-pricing.txt"],
                  f"keyword {keyword}")
            return f"sam {sorted(sam_files)}, lee {sorted(lee_files)}"

        step("two principals see different documents of one store", per_document)

        def refusals():
            store = state["store"]
            outsider = call("POST", f"/v1/vector_stores/{store}/search", keys["out"],
                            {"query": "pricing"})
            check(outsider.status == 403, f"outsider: {outsider!r}")
            anonymous = call("POST", f"/v1/vector_stores/{store}/search", "", {"query": "x"})
            check(anonymous.status == 401, f"no key: {anonymous!r}")
            bad = call("POST", f"/v1/vector_stores/{store}/search", keys["sam"],
                       {"query": "pricing", "filters": {"type": "eq", "key": "department",
                                                        "value": ["sales"]}})
            check(bad.status == 400 and bad.json()["error"]["param"] == "filters.value",
                  f"bad filter: {bad!r}")
            missing = call("GET", "/v1/vector_stores/vs_nosuchstore", keys["sam"])
            check(missing.status == 404, f"unknown store: {missing!r}")
            return "403 without a rule, 401 without a key, 400 naming filters.value, 404"

        step("refusals and errors", refusals)

        def answers():
            ids = state["ids"]
            by_id = {file_id: name for name, file_id in ids.items()}
            asked = call("POST", "/v1/chat/completions", keys["lee"],
                         {"model": f"kb:{state['store']}",
                          "messages": [{"role": "user", "content": "What about pricing?"}]})
            check(asked.status == 200, f"answer: {asked!r}")
            body = asked.json()
            check(body["choices"][0]["message"]["content"].startswith("Premium pricing"),
                  f"content {body}")
            cited = [url.split("/files/")[1].split("#")[0] for url in body["citations"]]
            check(cited and all(by_id.get(file_id) == "legal-pricing.txt" for file_id in cited),
                  f"lee's citations {body['citations']}")
            check([result["url"] for result in body["search_results"]] == body["citations"],
                  f"search_results {body['search_results']}")
            # The model saw lee's document as a numbered source, and nothing of sales'.
            sent = json.dumps(chat.last_body())
            check("[1] legal-pricing.txt" in sent, f"prompt {sent[:400]}")
            check("premium plan" not in sent and "Regional pricing" not in sent,
                  f"a sales passage reached the model: {sent[:400]}")
            return f"cited {len(cited)} passage(s) of legal-pricing.txt only"

        step("a kb: chat completion answers from the caller's documents with citations", answers)

        def deleted_file():
            file_id = state["ids"]["sales-pricing.txt"]
            deleted = call("DELETE", f"/v1/files/{file_id}", keys["sam"])
            check(deleted.status == 200, f"delete: {deleted!r}")
            hits = search(keys["sam"], "pricing premium plan", max_num_results=10)
            check(all(hit["file_id"] != file_id for hit in hits), f"still found: {hits}")
            gone = call("GET", f"/v1/vector_stores/{state['store']}/files/{file_id}", keys["sam"])
            check(gone.status == 404, f"store file after delete: {gone!r}")
            return f"{len(hits)} hits left, none from the deleted file"

        step("a file deleted through the Files API leaves the store", deleted_file)

        def redacted():
            document = ("# Renewal contacts\n\n手机 13812345678, email zhang.wei@example.com: "
                        "call about the renewal of the premium plan.\n").encode()
            uploaded = call("POST", "/v1/files", keys["cat"],
                            body=multipart("contacts.md", document),
                            content_type=f"multipart/form-data; boundary={BOUNDARY}")
            check(uploaded.status == 200, f"upload: {uploaded!r}")
            file_id = uploaded.json()["id"]
            created = call("POST", "/v1/vector_stores", keys["cat"],
                           {"name": "contacts", "file_ids": [file_id]})
            check(created.status == 200, f"create: {created!r}")
            store = created.json()["id"]
            deadline = time.monotonic() + 90
            while True:
                got = call("GET", f"/v1/vector_stores/{store}/files/{file_id}", keys["cat"])
                check(got.status == 200, f"retrieve: {got!r}")
                if got.json()["status"] != "in_progress":
                    break
                check(time.monotonic() < deadline, "still ingesting")
                time.sleep(0.2)
            check(got.json()["status"] == "completed", f"file: {got.json()}")
            answer = call("POST", f"/v1/vector_stores/{store}/search", keys["cat"],
                          {"query": "renewal premium plan"})
            check(answer.status == 200, f"search: {answer!r}")
            hits = answer.json()["data"]
            check(len(hits) == 1, f"hits {hits}")
            text = "".join(part["text"] for part in hits[0]["content"])
            content = call("GET", f"/v1/vector_stores/{store}/files/{file_id}/content",
                           keys["cat"])
            check(content.status == 200, f"content: {content!r}")
            stored = "".join(part["text"] for part in content.json()["data"])
            for seen in (text, stored):
                check("13812345678" not in seen and "zhang.wei" not in seen, f"not redacted: {seen}")
                check("138****5678" in seen and "EMAIL_ADDRESS_" in seen and "@example.com" in seen,
                      f"redacted how? {seen}")
            for query in ("13812345678", "zhang.wei"):
                found = call("POST", f"/v1/vector_stores/{store}/search", keys["cat"],
                             {"query": query, "ranking_options": {"ranker": "keyword"}})
                check(found.status == 200 and found.json()["data"] == [],
                      f"keyword {query} found {found!r}")
            return f"searched back as: {' '.join(text.split())}"

        step("a file added under redact:pii is searched back redacted", redacted)

        def restart():
            nonlocal server, client
            before = search(keys["sam"], "pricing premium plan", max_num_results=10)
            server.stop()
            folder = os.path.join(data_dir, "vector-stores", state["store"])
            snapshots = sorted(name for name in os.listdir(folder) if name.endswith(".snap")) \
                if os.path.isdir(folder) else []
            check(snapshots, f"no snapshot in {folder}")
            server = e2e.Server(args.binary, repository,
                                ["--config", config, "--data-dir", data_dir])
            server.start()
            client = server.client()
            after = search(keys["sam"], "pricing premium plan", max_num_results=10)
            check(after == before, f"after the restart {after}, before {before}")
            logged = server.stderr_text() + "\n".join(server.stdout_lines)
            check(f"vector store {state['store']}: loaded snapshot" in logged,
                  f"no snapshot loaded:\n{server.describe()}")
            return f"{snapshots[-1]} loaded; {len(after)} hits as before"

        step("a restart loads the stores' index snapshots and answers the same", restart)
    except E2eError as error:
        tally.record("server", f"{error}\n{server.describe()}")
    finally:
        server.stop(expect_exit_code=None)
        chat.stop()
        shutil.rmtree(temp, ignore_errors=True)
    return tally.finish()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
