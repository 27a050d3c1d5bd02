"""The server: moto's WSGI app serialized, bound to loopback, with the faults and
the capacity accounting, and its command line."""

import argparse
import io
import ipaddress
import json
import os
import signal
import socket
import sys
import threading
import uuid

from .capacity import Capacity
from .faults import Faults, _error
from .partitions import patch_query_partitions
from .streams import patch_update_stream
from .transactions import patch_transactions
from .ttl import start_sweeper


def loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cache_module_list():
    """moto's dispatcher lists its package directory on every request
    (backends.list_of_moto_modules); the list never changes, so list once."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def faulty(app, faults, lock, capacity=None):
    """Serve app one request at a time (under lock) with faults, and serve
    POST /_clockwork/faults. A write is noted under the same lock, so no
    index query can see it before its lag starts."""

    def wrapped(environ, start_response):
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        raw = environ["wsgi.input"].read(length) if length > 0 else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        if environ.get("PATH_INFO") == "/_clockwork/faults" and environ.get("REQUEST_METHOD") == "POST":
            try:
                state = faults.configure(json.loads(raw or b"{}"))
                status, out = "200 OK", json.dumps(state).encode()
            except Exception as err:  # a bad setting
                status, out = "400 Bad Request", json.dumps({"message": str(err)}).encode()
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(out)))])
            return [out]
        if faults.scheduler_refused(environ):
            out = json.dumps({"Message": "Rate exceeded"}).encode()
            start_response("429 Too Many Requests", [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(out))),
                ("x-amzn-ErrorType", "ThrottlingException"),
                ("x-amzn-RequestId", str(uuid.uuid4())),
            ])
            return [out]
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        service, _, op = target.partition(".")
        body = None
        if service in ("DynamoDB_20120810", "DynamoDBStreams_20120810"):
            try:
                body = json.loads(raw or b"{}")
            except Exception:
                body = None
            refused = faults.before(service, op, body)
            if refused is not None:
                code, out = refused
                start_response("%d %s" % (code, "OK" if code == 200 else "Bad Request"), [
                    ("Content-Type", "application/x-amz-json-1.0"),
                    ("Content-Length", str(len(out))),
                    ("x-amzn-RequestId", str(uuid.uuid4())),
                ])
                return [out]
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers
            return lambda data: None

        with lock:
            plan = capacity.plan(environ, op, body) if capacity is not None and service == "DynamoDB_20120810" else None
            result = app(environ, capture)
            try:
                answer = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
            status_code = int(captured["status"].split()[0])
            if plan is not None:
                answer = capacity.answer(plan, status_code, answer)
            if body is not None:
                new = faults.after(service, op, body, status_code, answer)
                answer = new
                if faults.lose_answer(service, op, body, status_code):
                    _, answer = _error("com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error")
                    captured["status"] = "500 Internal Server Error"
            if plan is not None or body is not None:
                import binascii
                fix = {"content-length": str(len(answer)), "x-amz-crc32": str(binascii.crc32(answer))}
                captured["headers"] = [
                    (k, fix.get(k.lower(), v)) for k, v in captured["headers"]
                ]
        start_response(captured["status"], captured["headers"])
        return [answer]

    return wrapped


def main(doc=__doc__):
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument(
        "--exit-on-stdin-eof",
        action="store_true",
        help="exit when standard input reaches end of file",
    )
    args = parser.parse_args()
    if not loopback(args.host):
        parser.error("--host must be a loopback address")

    from werkzeug.serving import make_server
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )

    class QuietHandler(MotoRequestHandler):
        def setup(self):
            super().setup()
            # Answers are written in several sends; without NODELAY each
            # waits for the client's delayed ACK of the previous one.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_request(self, *_args, **_kwargs):
            pass

    patch_update_stream()
    patch_transactions()
    patch_query_partitions()
    cache_module_list()
    dispatcher = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    faults = Faults()
    if os.environ.get("CLOCKWORK_EMULATOR_FAULTS"):
        faults.configure(json.loads(os.environ["CLOCKWORK_EMULATOR_FAULTS"]))

    server = make_server(
        args.host,
        args.port,
        faulty(dispatcher, faults, lock, Capacity()),
        threaded=True,
        request_handler=QuietHandler,
    )
    port = server.server_port
    os.environ.setdefault("MOTO_PORT", str(port))
    start_sweeper(lock, float(os.environ.get("CLOCKWORK_EMULATOR_TTL_INTERVAL", "1")))

    def stop(*_args):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    if args.exit_on_stdin_eof:

        def watch_stdin():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except OSError:
                pass
            os._exit(0)

        threading.Thread(target=watch_stdin, daemon=True).start()

    host = args.host if ":" not in args.host else "[" + args.host + "]"
    print("READY http://%s:%d" % (host, port), flush=True)
    server.serve_forever()
    # Connection threads may sit in keep-alive reads; the state is in memory
    # only, so there is nothing to flush.
    os._exit(0)
