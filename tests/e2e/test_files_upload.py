#!/usr/bin/env python3
"""A large upload to the Files API stays out of the server's memory (the real binary).

    /usr/bin/python3 tests/e2e/test_files_upload.py --binary build/rampart \
        --repository examples/models

Uploads a file of --megabytes MiB (default 300) to POST /v1/files as the Node SDK does
(multipart, Transfer-Encoding: chunked, no Content-Length), sampling the server's resident
memory (VmRSS) while it runs: its growth over the idle server must stay under --max-growth-mb
(default 64), far below the file. Then the content comes back byte for byte (SHA-256, streamed),
an upload over --files-max-bytes is 413 and leaves no file behind, and a delete removes the bytes.
Then, with an access: section: two tenants' keys, each seeing only its own files (another
tenant's file is 404 to retrieve, read and delete, and absent from its list), and a key whose
role may not upload refused 403.
Prints one line per check and ends with "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402

BOUNDARY = "----rampart-e2e-7d3f"
BLOCK = 1 << 20


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def block(index: int) -> bytes:
    """Block `index` of the content: varied bytes, with lines that look like delimiters."""
    seed = hashlib.sha256(index.to_bytes(8, "little")).digest()
    return (seed * (BLOCK // len(seed) - 1) + b"\r\n--" + BOUNDARY.encode()[:15])[:BLOCK].ljust(
        BLOCK, b"x")


def multipart(megabytes: int, digest) -> "iterator":
    yield (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n"
           f"assistants\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; "
           f"filename=\"big.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    for index in range(megabytes):
        data = block(index)
        digest.update(data)
        yield data
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


def upload(port: int, megabytes: int, digest):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("POST", "/v1/files", body=multipart(megabytes, digest),
                       headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
                       encode_chunked=True)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


POLICY = """
roles:
  - name: uploader
  - name: reader
rules:
  - id: uploaders
    effect: permit
    principal: {role: uploader}
    action: [files:create, files:read, files:delete]
    resource: {type: file}
  - id: readers
    effect: permit
    principal: {role: reader}
    action: files:read
    resource: {type: file}
  - id: everyone-reads-the-server
    effect: permit
    action: server:read
"""


def tenants(args, temp: str) -> str:
    """Two tenants' files through one server: each sees only its own."""
    data_dir = os.path.join(temp, "tenants-data")
    repository = os.path.join(temp, "tenants-models")
    os.makedirs(repository)
    policy = os.path.join(temp, "files-policy.yaml")
    with open(policy, "w") as out:
        out.write(POLICY)
    config = os.path.join(temp, "files-access.yaml")
    with open(config, "w") as out:
        out.write(f"access:\n  policy_files: [{policy}]\n")

    def rampart(*arguments: str) -> str:
        done = subprocess.run([args.binary, *arguments, "--data-dir", data_dir],
                              capture_output=True, text=True, timeout=60)
        check(done.returncode == 0, f"rampart {' '.join(arguments)}: {done.stderr}")
        return done.stdout.strip()

    keys = {}
    for tenant in ("acme", "beta"):
        rampart("tenants", "create", tenant)
        keys[tenant] = rampart("keys", "create", "--tenant", tenant, "--name", "up",
                               "--role", "uploader")
    keys["reader"] = rampart("keys", "create", "--tenant", "acme", "--name", "rd",
                             "--role", "reader")
    server = e2e.Server(args.binary, repository, ["--config", config, "--data-dir", data_dir],
                        wait_for="live")
    try:
        server.start()
        client = server.client()

        def call(method: str, path: str, key: str, body: bytes = None, content_type: str = ""):
            headers = {"authorization": f"Bearer {key}"}
            if content_type:
                headers["content-type"] = content_type
            return client.request(method, path, body, headers)

        body = b"".join(multipart(1, hashlib.sha256()))
        kind = f"multipart/form-data; boundary={BOUNDARY}"
        uploaded = call("POST", "/v1/files", keys["acme"], body, kind)
        check(uploaded.status == 200, f"acme upload: {uploaded!r}")
        file_id = uploaded.json()["id"]
        check(call("GET", f"/v1/files/{file_id}", keys["acme"]).status == 200, "acme retrieve")
        check(call("GET", f"/v1/files/{file_id}", keys["reader"]).status == 200,
              "acme's reader retrieve")
        for method, path in (("GET", f"/v1/files/{file_id}"),
                             ("GET", f"/v1/files/{file_id}/content"),
                             ("DELETE", f"/v1/files/{file_id}")):
            other = call(method, path, keys["beta"])
            check(other.status == 404, f"beta {method} {path}: {other!r}")
        listed = call("GET", "/v1/files", keys["beta"]).json()
        check(listed["data"] == [], f"beta's list: {listed}")
        listed = call("GET", "/v1/files", keys["acme"]).json()
        check([f["id"] for f in listed["data"]] == [file_id], f"acme's list: {listed}")
        refused = call("POST", "/v1/files", keys["reader"], body, kind)
        check(refused.status == 403, f"a reader's upload: {refused!r}")
        anonymous = client.request("GET", "/v1/files")
        check(anonymous.status == 401, f"no credentials: {anonymous!r}")
        check(call("DELETE", f"/v1/files/{file_id}", keys["acme"]).status == 200, "acme delete")
        client.close()
        server.stop()
    finally:
        server.cleanup()
    return "another tenant's file is 404 and unlisted; a reader's upload 403; no key 401"


def run(args) -> int:
    temp = tempfile.mkdtemp(prefix="rampart-files-e2e-")
    data_dir = os.path.join(temp, "data")
    limit_mb = args.megabytes + 8
    # No model is needed: an empty repository, and the server waited for until live.
    repository = os.path.join(temp, "models")
    os.makedirs(repository)
    server = e2e.Server(args.binary, repository,
                        ["--data-dir", data_dir, "--files-max-bytes", str(limit_mb << 20)],
                        wait_for="live")
    tally = e2e.Tally()
    step = tally.step

    try:
        server.start()
        pid = server.process.pid
        state = {}

        def large_upload():
            baseline = rss_bytes(pid)
            peak = [baseline]
            done = threading.Event()

            def sample():
                while not done.is_set():
                    peak[0] = max(peak[0], rss_bytes(pid))
                    time.sleep(0.01)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            digest = hashlib.sha256()
            started = time.monotonic()
            status, body = upload(server.port, args.megabytes, digest)
            seconds = time.monotonic() - started
            done.set()
            sampler.join()
            check(status == 200, f"upload answered {status}: {body[:300]!r}")
            file = json.loads(body)
            check(file["bytes"] == args.megabytes * BLOCK, f"bytes {file['bytes']}")
            state["id"] = file["id"]
            state["sha256"] = digest.hexdigest()
            growth = peak[0] - baseline
            check(growth < args.max_growth_mb << 20,
                  f"resident memory grew {growth >> 20} MiB during a {args.megabytes} MiB upload")
            return (f"{args.megabytes} MiB in {seconds:.1f} s ({args.megabytes / seconds:.0f} MiB/s); "
                    f"RSS {baseline >> 20} -> peak {peak[0] >> 20} MiB (+{growth >> 20} MiB)")

        def content():
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
            connection.request("GET", f"/v1/files/{state['id']}/content")
            response = connection.getresponse()
            check(response.status == 200, f"content answered {response.status}")
            digest = hashlib.sha256()
            total = 0
            while True:
                piece = response.read(BLOCK)
                if not piece:
                    break
                total += len(piece)
                digest.update(piece)
            connection.close()
            check(total == args.megabytes * BLOCK, f"content of {total} bytes")
            check(digest.hexdigest() == state["sha256"], "content differs from the upload")
            return f"{total} bytes, SHA-256 matches"

        def over_limit():
            status, body = upload(server.port, limit_mb + 1, hashlib.sha256())
            check(status == 413, f"answered {status}: {body[:200]!r}")
            names = sorted(os.listdir(os.path.join(data_dir, "files")))
            check(names == [state["id"]], f"files on disk: {names}")
            return "413, no part file left"

        def delete():
            client = server.client()
            response = client.request("DELETE", f"/v1/files/{state['id']}")
            check(response.status == 200 and response.json()["deleted"] is True,
                  f"delete answered {response.status}: {response.text()[:200]}")
            check(os.listdir(os.path.join(data_dir, "files")) == [], "bytes left after delete")
            missing = client.get(f"/v1/files/{state['id']}")
            check(missing.status == 404, f"after delete: {missing.status}")
            return "deleted, bytes gone, 404 after"

        step("large chunked upload stays out of memory", large_upload)
        if "id" in state:
            step("content streams back byte for byte", content)
            step("an upload over the limit is 413 and leaves nothing", over_limit)
            step("delete removes the bytes", delete)
        server.stop()
        step("files belong to their tenant", lambda: tenants(args, temp))
    except E2eError as error:
        tally.record("server", f"{error}\n{server.describe()}")
    finally:
        server.cleanup()
        shutil.rmtree(temp, ignore_errors=True)
    return tally.finish()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--megabytes", type=int, default=300)
    parser.add_argument("--max-growth-mb", type=int, default=64)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
