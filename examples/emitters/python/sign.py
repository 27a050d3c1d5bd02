"""Sign an AIGP RFC-032 message (an ANTICIPATE, an execution event) and send it.

d_dna_signature is "sha256:" and the hex SHA-256 of the message's RFC 8785
(JCS) form without the d_dna_signature field. Use a maintained RFC 8785
library: json.dumps is not JCS (it writes a weight of 1.0 as "1.0" where
JCS writes "1", and orders nothing), and a digest of it is refused with a
digest mismatch that names d_dna_signature.

    python sign.py anticipation.json            # sign and POST /v1/anticipations
    python sign.py --naive anticipation.json    # the json.dumps mistake, refused

CLOCKWORK_URL (default http://127.0.0.1:8080) and CLOCKWORK_TOKEN name the
server and the bearer token. It prints the HTTP status and the answer.
"""

import hashlib
import json
import os
import sys
import urllib.error
import urllib.request

import rfc8785


def sign(message: dict) -> dict:
    body = {k: v for k, v in message.items() if k != "d_dna_signature"}
    digest = hashlib.sha256(rfc8785.dumps(body)).hexdigest()
    return {**body, "d_dna_signature": "sha256:" + digest}


def sign_naively(message: dict) -> dict:
    """The mistake: json.dumps is not RFC 8785."""
    body = {k: v for k, v in message.items() if k != "d_dna_signature"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return {**body, "d_dna_signature": "sha256:" + hashlib.sha256(text.encode()).hexdigest()}


def post(path: str, message: dict) -> tuple[int, str]:
    url = os.environ.get("CLOCKWORK_URL", "http://127.0.0.1:8080") + path
    req = urllib.request.Request(url, data=json.dumps(message).encode(), method="POST", headers={
        "Content-Type": "application/json",
        "Authorization": "Bearer " + os.environ["CLOCKWORK_TOKEN"],
    })
    try:
        with urllib.request.urlopen(req) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


if __name__ == "__main__":
    naive = sys.argv[1] == "--naive"
    with open(sys.argv[-1]) as f:
        message = json.load(f)
    signed = sign_naively(message) if naive else sign(message)
    status, answer = post("/v1/anticipations", signed)
    print(status)
    print(answer)
