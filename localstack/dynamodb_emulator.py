"""DynamoDB and DynamoDB Streams emulator for the tests: moto's server,
serialized and bound to loopback.

Started by dynamodb-emulator.sh inside the cached virtualenv, never directly.
It differs from `moto_server` in these ways, which the tests rely on:

  * Requests are served one at a time (a lock around the WSGI app). moto's
    backends are not thread-safe: a conditional write checks and then writes
    without a lock, and a failed TransactWriteItems puts back what it changed,
    which could drop a concurrent write. Serializing makes every request
    atomic, as DynamoDB's conditional writes are.
  * --port 0 binds a free port, and the bound endpoint is printed on stdout
    as one line "READY http://127.0.0.1:PORT" once the socket listens.
  * --exit-on-stdin-eof exits when standard input closes, so an emulator
    started by a test binary dies with it even if the binary is killed.
  * An UpdateItem that creates its item emits one INSERT stream record, as
    DynamoDB does. moto 5.2.5 first stores a keys-only placeholder item and
    records a second, keys-only INSERT for it (see emulator/streams.py).

Fault injection (off unless asked for), for the faults DynamoDB has and moto
does not: set from the environment variable CLOCKWORK_EMULATOR_FAULTS (JSON)
at start, or at any time with POST /_clockwork/faults (the same JSON; the
answer is the settings in force). See class Faults in emulator/faults.py.

Request logging is off; errors still go to stderr. The package directory
listing that moto repeats on every request is cached (cache_module_list).

Two costs of moto that grow with the table are removed, with the same
results (a long campaign otherwise slows to a few requests a second):

  * TransactWriteItems deep-copied each table it writes, items and stream
    records included, once per action, to restore it if the transaction
    fails. Only the touched items are copied now (emulator/transactions.py).
  * Query scanned and sorted the whole table for each call. It now reads
    only the items of the queried partition: of the table, or of a
    secondary index through an index kept up to date on every write
    (emulator/partitions.py).

  * Time to Live: items past their TTL attribute are deleted (every second,
    where DynamoDB takes up to days) with a REMOVE stream record by the
    service principal dynamodb.amazonaws.com (emulator/ttl.py).

The parts live in the package emulator/, one module per behaviour: streams,
transactions, partitions, faults, capacity, ttl, and the server. Each has its
tests in emulator/tests/ (test_<module>.py), against the DynamoDB behaviour it
imitates; `go test ./internal/store/dynamo/dynamotest -run TestEmulatorModules`
runs them on an emulator of their own."""

from emulator.server import main

if __name__ == "__main__":
    main(__doc__)
