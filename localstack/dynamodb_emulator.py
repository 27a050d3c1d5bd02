"""DynamoDB and DynamoDB Streams emulator for the tests: moto's server,
serialized and bound to loopback.

Started by dynamodb-emulator.sh inside the cached virtualenv, never directly.
It differs from `moto_server` in these ways, which the tests rely on:

  * Requests are served one at a time (a lock around the WSGI app). moto's
    backends are not thread-safe: a conditional write checks and then writes
    without a lock, and a failed TransactWriteItems restores a deep copy of
    the table, which could drop a concurrent write. Serializing makes every
    request atomic, as DynamoDB's conditional writes are.
  * --port 0 binds a free port, and the bound endpoint is printed on stdout
    as one line "READY http://127.0.0.1:PORT" once the socket listens.
  * --exit-on-stdin-eof exits when standard input closes, so an emulator
    started by a test binary dies with it even if the binary is killed.
  * An UpdateItem that creates its item emits one INSERT stream record, as
    DynamoDB does. moto 5.2.5 first stores a keys-only placeholder item and
    records a second, keys-only INSERT for it (see patch_update_stream).

Request logging is off; errors still go to stderr. The package directory
listing that moto repeats on every request is cached (cache_module_list).
"""

import argparse
import ipaddress
import os
import signal
import socket
import sys
import threading


def loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def patch_update_stream():
    """Drop the stream record of the placeholder that moto's update_item
    puts before applying the update expression to a new item."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    state = threading.local()
    update_item = DynamoDBBackend.update_item
    put_item = Table.put_item

    def patched_update_item(self, *args, **kwargs):
        state.updating = True
        try:
            return update_item(self, *args, **kwargs)
        finally:
            state.updating = False

    def patched_put_item(self, item_attrs, *args, **kwargs):
        if getattr(state, "updating", False) and not args and not kwargs:
            shard, self.stream_shard = self.stream_shard, None
            try:
                return put_item(self, item_attrs)
            finally:
                self.stream_shard = shard
        return put_item(self, item_attrs, *args, **kwargs)

    DynamoDBBackend.update_item = patched_update_item
    Table.put_item = patched_put_item


def cache_module_list():
    """moto's dispatcher lists its package directory on every request
    (backends.list_of_moto_modules); the list never changes, so list once."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    cache_module_list()
    dispatcher = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialized(environ, start_response):
        with lock:
            result = dispatcher(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        return [body]

    server = make_server(
        args.host,
        args.port,
        serialized,
        threaded=True,
        request_handler=QuietHandler,
    )
    port = server.server_port
    os.environ.setdefault("MOTO_PORT", str(port))

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


if __name__ == "__main__":
    main()
