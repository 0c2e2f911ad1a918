#!/usr/bin/env python3
"""Access control on the real binary (docs/access.md): `rampart keys create` prints the key alone;
a key with a role infers on one model and is refused another, over HTTP and gRPC; the 401
answers (no credentials, a bad key, a token with `alg: none`) and the 403 with the request id; a
JWT signed with HS256 and checked against a JWKS file; an mTLS identity over HTTPS (certificates
made by the openssl CLI); a 429 with Retry-After from a tiny requests_per_minute; and the example
config's anonymous loopback access still serving plain requests.

Usage: test_access.py --binary build/rampart --grpc-call build/tests/grpc_call
                      --repository examples/models --source-dir .
"""

import argparse
import base64
import hashlib
import hmac
import http.client
import json
import os
import re
import ssl
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import check  # noqa: E402

KEY_LINE = re.compile(r"^rk_live_[A-Za-z0-9]{12}_[A-Za-z0-9]{32}\n$")
ISSUER = "https://idp.test"
JWT_SECRET = b"an HS256 secret of thirty-two+ bytes!"



def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256_token(claims: Dict, secret: bytes = JWT_SECRET, alg: str = "HS256") -> str:
    header = b64url(json.dumps({"alg": alg, "typ": "JWT", "kid": "k1"}).encode())
    payload = b64url(json.dumps(claims).encode())
    if alg == "none":
        return f"{header}.{payload}."
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(signature)}"


class Context(e2e.DriverContext):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args, "rampart-access-", command_timeout_s=60)
        self.data_dir = os.path.join(self.work, "data")

    def config(self, name: str, access: str) -> str:
        policy = self.write("policy.yaml", e2e.ANALYST_POLICY)
        jwks = self.write("jwks.json", json.dumps(
            {"keys": [{"kty": "oct", "kid": "k1", "alg": "HS256", "k": b64url(JWT_SECRET)}]}))
        return self.write(name, f"""
access:
  policy_files: [{policy}]
  jwt:
    jwks_file: {jwks}
    issuer: {ISSUER}
    audience: rampart
    algorithms: [HS256]
    claims: {{tenant: tid, principal: sub, roles: roles}}
{access}
""")

    def make_key(self, *extra: str) -> str:
        made = self.rampart("keys", "create", "--tenant", "acme", "--data-dir", self.data_dir,
                            *extra)
        check(made.returncode == 0, f"keys create: {made.returncode} {made.stderr}")
        check(KEY_LINE.match(made.stdout) is not None,
              f"keys create must print the key alone, got {made.stdout!r}")
        return made.stdout.strip()


def infer(client: e2e.Client, model: str, headers: Dict[str, str]) -> e2e.Response:
    return e2e.infer_json(client, model, headers)


def grpc_call(ctx: Context, server: e2e.Server, method: str, request: Dict,
              metadata: Tuple[str, ...] = ()) -> Dict:
    return e2e.grpc_call(ctx.args.grpc_call, server, method, request, metadata)


def test_keys_and_roles(ctx: Context) -> str:
    created = ctx.rampart("tenants", "create", "acme", "--data-dir", ctx.data_dir)
    check(created.returncode == 0, f"tenants create: {created.stderr}")
    key = ctx.make_key("--name", "ci", "--role", "analyst")
    limited = ctx.make_key("--name", "limited", "--role", "analyst")
    listed = ctx.rampart("keys", "list", "--data-dir", ctx.data_dir)
    check(listed.returncode == 0 and key.split("_")[2] in listed.stdout and
          key not in listed.stdout, f"keys list shows ids, never keys: {listed.stdout}")
    config = ctx.config("keys.yaml", """  quotas:
    rules:
      - {scope: principal, tenant: acme, name: limited, requests_per_minute: 1}""")
    server = e2e.Server(ctx.args.binary, ctx.args.repository,
                        ["--config", config, "--data-dir", ctx.data_dir])
    try:
        server.start()
        client = server.client()
        ok = infer(client, "simple", {"authorization": f"Bearer {key}"})
        check(ok.status == 200, f"analyst key on simple: {ok!r}")
        ok = infer(client, "simple", {"x-api-key": key})
        check(ok.status == 200, f"x-api-key on simple: {ok!r}")
        denied = infer(client, "mlp_classifier", {"x-api-key": key, "x-request-id": "req-e2e-403"})
        check(denied.status == 403 and "req-e2e-403" in denied.json()["error"],
              f"analyst key on mlp_classifier must be 403 naming the request id: {denied!r}")
        # 401s: nothing, a wrong key, alg none; each with WWW-Authenticate and a safe reason.
        for headers, reason in (({}, "no credentials"),
                                ({"x-api-key": key[:-1] + ("y" if key.endswith("x") else "x")},
                                 "invalid API key"),
                                ({"authorization": "Bearer " + hs256_token(
                                    {"iss": ISSUER, "sub": "x", "tid": "acme"}, alg="none")},
                                 "")):
            refused = infer(client, "simple", headers)
            check(refused.status == 401 and refused.header("www-authenticate") == "Bearer" and
                  reason in refused.json()["error"], f"401 for {headers}: {refused!r}")
        check(client.get("/v2/health/ready").status == 200, "readiness must stay open")
        # A rate: one request a minute for `limited`; a second in the same minute is 429 (a
        # third settles a minute that turned between the two).
        statuses = [infer(client, "simple", {"x-api-key": limited}) for _ in range(3)]
        refused = [r for r in statuses if r.status == 429]
        check(sum(r.status == 200 for r in statuses) <= 2 and refused and
              int(refused[0].header("retry-after")) >= 1,
              f"requests_per_minute 1: {[r.status for r in statuses]} {statuses!r}")
        # gRPC: the same decisions from metadata credentials.
        request = {"model_name": "simple", "inputs": [
            {"name": name, "datatype": "INT32", "shape": [1, 16],
             "contents": {"int_contents": list(range(16))}} for name in ("INPUT0", "INPUT1")]}
        granted = grpc_call(ctx, server, "ModelInfer", request, (f"x-api-key={key}",))
        check(granted["code"] == 0, f"gRPC infer on simple: {granted}")
        denied_grpc = grpc_call(ctx, server, "ModelInfer", dict(request, model_name="mlp_classifier"),
                                (f"authorization=Bearer {key}",))
        check(denied_grpc["code"] == 7, f"gRPC infer on mlp_classifier: {denied_grpc}")
        anonymous = grpc_call(ctx, server, "ModelInfer", request)
        check(anonymous["code"] == 16 and "no credentials" in anonymous["message"],
              f"gRPC without credentials: {anonymous}")
        live = grpc_call(ctx, server, "ServerLive", {})
        check(live["code"] == 0, f"ServerLive must stay open: {live}")
        # Revoked by the CLI while the server runs: refused within the key table's poll period.
        key_id = "_".join(key.split("_")[:3])  # rk_live_<12>
        revoked = ctx.rampart("keys", "revoke", key_id, "--data-dir", ctx.data_dir)
        check(revoked.returncode == 0, f"keys revoke: {revoked.stderr}")
        deadline = time.monotonic() + 10
        status = 200
        while status == 200 and time.monotonic() < deadline:
            status = infer(client, "simple", {"x-api-key": key}).status
            time.sleep(0.05)  # polling under a deadline, not synchronisation
        check(status == 401, f"a revoked key must be refused, got {status}")
        client.close()
        server.stop()
    finally:
        server.cleanup()
    return "roles, 401/403/429 shapes, gRPC codes, revocation"


def test_jwt(ctx: Context) -> str:
    config = ctx.config("jwt.yaml", "")
    server = e2e.Server(ctx.args.binary, ctx.args.repository,
                        ["--config", config, "--data-dir", ctx.data_dir])
    try:
        server.start()
        client = server.client()
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": "rampart", "sub": "alice", "tid": "acme",
                  "roles": ["analyst"], "iat": now, "exp": now + 300}
        bearer = {"authorization": "Bearer " + hs256_token(claims)}
        check(infer(client, "simple", bearer).status == 200, "a valid JWT on simple")
        check(infer(client, "mlp_classifier", bearer).status == 403, "a valid JWT on mlp")
        forged = {"authorization": "Bearer " + hs256_token(claims, secret=b"x" * 32)}
        refused = infer(client, "simple", forged)
        check(refused.status == 401 and "signature" in refused.json()["error"],
              f"a forged JWT: {refused!r}")
        expired = dict(claims, exp=now - 3600, iat=now - 7200)
        refused = infer(client, "simple", {"authorization": "Bearer " + hs256_token(expired)})
        check(refused.status == 401 and "expired" in refused.json()["error"],
              f"an expired JWT: {refused!r}")
        client.close()
        server.stop()
    finally:
        server.cleanup()
    return "HS256 from a JWKS file: granted, forbidden, forged, expired"


def openssl(*arguments: str) -> None:
    result = subprocess.run(["openssl", *arguments], capture_output=True, text=True, timeout=60)
    check(result.returncode == 0, f"openssl {' '.join(arguments)}: {result.stderr}")


def test_mtls(ctx: Context) -> str:
    d = os.path.join(ctx.work, "pki")
    os.makedirs(d)
    p = lambda name: os.path.join(d, name)  # noqa: E731
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", p("ca.key"), "-out", p("ca.pem"), "-days", "2", "-subj", "/CN=test CA")
    for name, subject, extension in (
            ("server", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
            ("client", "/CN=batch.svc.acme.internal", "subjectAltName=DNS:batch.acme.internal")):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", p(f"{name}.key"), "-out", p(f"{name}.csr"), "-subj", subject)
        with open(p(f"{name}.ext"), "w") as file:
            file.write(extension + "\n")
        openssl("x509", "-req", "-in", p(f"{name}.csr"), "-CA", p("ca.pem"), "-CAkey",
                p("ca.key"), "-CAcreateserial", "-out", p(f"{name}.pem"), "-days", "2",
                "-extfile", p(f"{name}.ext"))
    config = ctx.config("mtls.yaml", """  mtls:
    - {subject_cn: "*.svc.acme.internal", tenant: acme, principal: "{cn}", roles: [analyst]}""")
    server = e2e.Server(ctx.args.binary, ctx.args.repository,
                        ["--config", config, "--data-dir", ctx.data_dir,
                         "--http-ssl-cert", p("server.pem"), "--http-ssl-key", p("server.key"),
                         "--http-ssl-root-cert", p("ca.pem"), "--http-ssl-mutual"],
                        wait_for="listening")
    try:
        server.start()
        tls = ssl.create_default_context(cafile=p("ca.pem"))
        tls.load_cert_chain(p("client.pem"), p("client.key"))
        results = {}
        for model in ("simple", "mlp_classifier"):
            connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=tls,
                                                     timeout=30)
            connection.request("POST", f"/v2/models/{model}/infer", json.dumps(e2e.SIMPLE_REQUEST),
                               {"content-type": "application/json"})
            reply = connection.getresponse()
            results[model] = (reply.status, reply.read().decode())
            connection.close()
        check(results["simple"][0] == 200, f"the client certificate's identity on simple: "
                                           f"{results['simple']}")
        check(results["mlp_classifier"][0] == 403, f"... on mlp_classifier: "
                                                   f"{results['mlp_classifier']}")
        server.stop()
    finally:
        server.cleanup()
    return "a client certificate mapped by subject CN: granted simple, refused mlp_classifier"


def test_example_config(ctx: Context) -> str:
    # As `make run` starts it: the example config from the source tree, anonymous on loopback;
    # its keyring's master key (which `make run` makes under ./data) is a temporary one here.
    master_key = os.path.join(ctx.work, "example-master.key")
    with open(os.open(master_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        out.write(os.urandom(32))
    server = e2e.Server(ctx.args.binary, ctx.args.repository,
                        ["--config", os.path.join(ctx.args.source_dir, "examples/rampart.yaml"),
                         "--data-dir", os.path.join(ctx.work, "example-data"),
                         "--master-key-file", master_key])
    previous = os.getcwd()
    os.chdir(ctx.args.source_dir)  # the example names its policy file from the source root
    try:
        server.start()
        client = server.client()
        reply = infer(client, "simple", {})
        check(reply.status == 200, f"plain request on the example config: {reply!r}")
        models = client.get("/v1/models")
        check(models.status == 200 and models.json()["data"], f"/v1/models: {models!r}")
        client.close()
        server.stop()
    finally:
        os.chdir(previous)
        server.cleanup()
    return "anonymous loopback admin serves plain requests"


TESTS: List[Tuple[str, Callable[[Context], str]]] = [
    ("keys and roles", test_keys_and_roles),
    ("jwt", test_jwt),
    ("mtls", test_mtls),
    ("example config", test_example_config),
]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--grpc-call", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args(argv)
    args.binary = os.path.abspath(args.binary)
    args.grpc_call = os.path.abspath(args.grpc_call)
    args.repository = os.path.abspath(args.repository)
    args.source_dir = os.path.abspath(args.source_dir)
    return e2e.run_tests(Context(args), TESTS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
