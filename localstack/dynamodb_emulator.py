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
    records a second, keys-only INSERT for it (see patch_update_stream).

Fault injection (off unless asked for), for the faults DynamoDB has and moto
does not: set from the environment variable CLOCKWORK_EMULATOR_FAULTS (JSON)
at start, or at any time with POST /_clockwork/faults (the same JSON; the
answer is the settings in force). See class Faults.

Request logging is off; errors still go to stderr. The package directory
listing that moto repeats on every request is cached (cache_module_list).

Two costs of moto that grow with the table are removed, with the same
results (a long campaign otherwise slows to a few requests a second):

  * TransactWriteItems deep-copied each table it writes, items and stream
    records included, once per action, to restore it if the transaction
    fails. Only the touched items are copied now (patch_transactions).
  * Query scanned and sorted the whole table for each call. It now reads
    only the items of the queried partition: of the table, or of a
    secondary index through an index kept up to date on every write
    (patch_query_partitions).
"""

import argparse
import copy
import io
import ipaddress
import json
import os
import random
import signal
import socket
import sys
import threading
import time
import uuid


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


def _current_item(table, hash_key, range_key):
    """The stored item of a primary key, or None; reads table.items without
    creating the empty per-hash dict that moto's defaultdict would add."""
    from moto.dynamodb.models.dynamo_type import Item

    stored = dict.get(table.items, hash_key)
    if table.range_key_attr is not None:
        if range_key is None or not isinstance(stored, dict):
            return None
        stored = stored.get(range_key)
    return stored if isinstance(stored, Item) else None


def _request_key(table, key):
    """The primary key (hash, range or None) that moto's update_item and
    delete_item address for a request's Key, or None when moto would not
    find one (it then fails without writing)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    if not isinstance(key, dict) or table.hash_key_attr not in key:
        return None
    hash_key = DynamoType(key[table.hash_key_attr])
    range_key = None
    if table.range_key_attr is not None:
        if table.range_key_attr not in key:
            return None
        range_key = DynamoType(key[table.range_key_attr])
    pk = (hash_key, range_key)
    hash(pk)
    return pk


def _transaction_keys(backend, transact_items):
    """[(table, primary key)] of the actions of a TransactWriteItems, each
    once, or None when one cannot be read the way moto reads it (the
    request is malformed; moto's own path then handles it)."""
    from moto.dynamodb.exceptions import ResourceNotFoundException
    from moto.dynamodb.models.dynamo_type import DynamoType

    if not isinstance(transact_items, list):
        return None
    keys = {}
    for action in transact_items:
        if not isinstance(action, dict) or len(action) != 1:
            # moto rejects the request at this action without applying it.
            continue
        op_type, op = next(iter(action.items()))
        if op_type not in ("Put", "Delete", "Update", "ConditionCheck"):
            continue  # moto records an error for it and applies nothing
        try:
            table = backend.get_table(op["TableName"])
        except ResourceNotFoundException:
            continue  # moto records an error for it and applies nothing
        except Exception:
            return None
        try:
            if op_type == "Put":
                attrs = op["Item"]
                pk = (
                    DynamoType(attrs[table.hash_key_attr]),
                    DynamoType(attrs[table.range_key_attr])
                    if table.range_key_attr is not None
                    else None,
                )
                hash(pk)
            else:
                pk = _request_key(table, op["Key"])
        except Exception:
            return None
        if pk is None:
            return None
        keys.setdefault((id(table), pk), (table, pk))
    return list(keys.values())


def patch_transactions():
    """Roll a failed TransactWriteItems back from copies of the items it
    touches instead of copies of whole tables.

    moto deep-copies every table named in the transaction, once per action,
    before applying any (all items and all stream records: the cost grows
    with the table), and on failure puts the copies in place of the tables.
    Here the items at the keys of the actions are deep-copied (update_item
    changes the stored item in place) and the length of each stream shard's
    record list noted; moto's own code then runs with its table copy
    replaced by the table itself, so that its restore is a no-op. If it
    raises, the items are put back (no stream record) and the records it
    added are dropped, then the error propagates. A transaction that
    succeeds runs exactly moto's code. A rejected one now also undoes the
    actions before an invalid action (moto does not), as DynamoDB applies
    none. Requests unlike DynamoDB's, and tables with Lambda event source
    mappings (whose shards moto may empty), take moto's original path."""
    from moto.dynamodb import models
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    transact_write_items = DynamoDBBackend.transact_write_items
    real_copy = models.copy

    class TableKeepingCopy:
        """The copy module as moto.dynamodb.models sees it during a
        transaction: deepcopy returns a Table itself."""

        def __getattr__(self, name):
            return getattr(real_copy, name)

        @staticmethod
        def deepcopy(x, *args, **kwargs):
            if isinstance(x, Table):
                return x
            return real_copy.deepcopy(x, *args, **kwargs)

    table_keeping_copy = TableKeepingCopy()

    def patched_transact_write_items(self, transact_items, *args, **kwargs):
        keys = _transaction_keys(self, transact_items)
        if keys is None or any(t.lambda_event_source_mappings for t, _ in keys):
            return transact_write_items(self, transact_items, *args, **kwargs)
        saved_items = [
            (
                table,
                pk,
                copy.deepcopy(_current_item(table, *pk)),
                dict.__contains__(table.items, pk[0]),
            )
            for table, pk in keys
        ]
        saved_shards = {}
        for table, _ in keys:
            shard = table.stream_shard
            if shard is not None:
                saved_shards[id(table)] = (table, shard, shard.items, len(shard.items))
        models.copy = table_keeping_copy
        try:
            return transact_write_items(self, transact_items, *args, **kwargs)
        except BaseException:
            for table, (hash_key, range_key), item, had_hash in saved_items:
                if table.range_key_attr is None:
                    if item is None:
                        table.items.pop(hash_key, None)
                    else:
                        table.items[hash_key] = item
                    continue
                if range_key is None:
                    continue
                stored = dict.get(table.items, hash_key)
                if item is not None:
                    if not isinstance(stored, dict):
                        stored = table.items[hash_key] = {}
                    stored[range_key] = item
                elif isinstance(stored, dict):
                    stored.pop(range_key, None)
                    if not stored and not had_hash:
                        del table.items[hash_key]
            for table, shard, records, length in saved_shards.values():
                if table.stream_shard is shard and shard.items is records:
                    del records[length:]
            raise
        finally:
            models.copy = real_copy

    DynamoDBBackend.transact_write_items = patched_transact_write_items


class _Partitions:
    """For one Table object: (index, value of its hash key) -> primary keys
    of the items that have that value, for the indexes with one hash key
    attribute. An item whose value cannot be hashed (not a scalar) is listed
    under every value of that index (moto compares it itself)."""

    ODD = object()

    def __init__(self, table, signature):
        self.signature = signature
        self.attrs = signature[2]
        self.parts = {name: {} for name, _ in self.attrs}
        self.odd = {name: set() for name, _ in self.attrs}
        self.where = {}
        for stored in table.items.values():
            items = stored.values() if table.range_key_attr is not None else [stored]
            for item in items:
                self.add((item.hash_key, item.range_key), item)

    def __deepcopy__(self, memo):
        # A copied table (a backup, a restored table) builds its own.
        return None

    def __copy__(self):
        return None

    @staticmethod
    def signature_of(table):
        attrs = {}
        for index in table.all_indexes():
            hashes = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"]
            # moto resolves an index name to the last index of that name.
            attrs.pop(index.name, None)
            if len(hashes) == 1:
                attrs[index.name] = hashes[0]
        return (table.hash_key_attr, table.range_key_attr, tuple(attrs.items()))

    def add(self, pk, item):
        from moto.dynamodb.models.dynamo_type import DynamoType

        entries = []
        for name, attr in self.attrs:
            value = item.attrs.get(attr)
            if value is None:
                continue
            try:
                # A copy: the stored value may be changed in place later.
                value = DynamoType(value)
                hash(value)
            except Exception:
                self.odd[name].add(pk)
                entries.append((name, self.ODD))
                continue
            self.parts[name].setdefault(value, set()).add(pk)
            entries.append((name, value))
        if entries:
            self.where[pk] = tuple(entries)

    def refresh(self, table, pk):
        for name, value in self.where.pop(pk, ()):
            if value is self.ODD:
                self.odd[name].discard(pk)
                continue
            pks = self.parts[name].get(value)
            if pks is not None:
                pks.discard(pk)
                if not pks:
                    del self.parts[name][value]
        item = _current_item(table, *pk)
        if item is not None:
            self.add(pk, item)


_PARTITIONS = "_clockwork_partitions"


def _sort_like_all_items(items):
    # The key of moto's Table.all_items.
    return sorted(
        items,
        key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key,
    )


def _touched(table, key_of):
    """Update the partitions of table, if built, for the key key_of()
    returns; drop them (rebuilt at the next index query) if there is no such
    key (a malformed request) or the update fails."""
    if table.__dict__.get(_PARTITIONS) is None:
        return
    try:
        pk = key_of()
        if pk is not None:
            table.__dict__[_PARTITIONS].refresh(table, pk)
            return
    except Exception:
        pass
    table.__dict__[_PARTITIONS] = None


def patch_query_partitions():
    """Let Query read only the queried partition instead of the whole table.

    moto's Table.query takes its candidates from all_items(), which lists
    and sorts every item of the table, then keeps those whose hash key
    matches. During a query whose partition is known, all_items() here
    returns only that partition's items, in the same order, and moto's own
    code does the rest (it still checks every key condition), so answers
    are unchanged:

      * on the table, the items under the hash key in table.items;
      * on a secondary index with one hash key attribute, queried with
        that attribute equal to a value, the items listed for that value in
        a _Partitions kept on the Table object. It is built at the first
        such query and updated for the written key after every write, even
        a failed one: Table.put_item and Table.delete_item (PutItem,
        BatchWriteItem, PartiQL, the placeholder of an UpdateItem),
        update_item (changes the stored item in place) and
        transact_write_items (after its rollback). It is rebuilt when the
        table's indexes change; a new table (created, restored, re-created
        under the same name) starts without one, and a deleted table's is
        dropped.

    Anything else (no hash key value, an index with several hash key
    attributes, a value that cannot be hashed) takes moto's path."""
    import inspect

    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType, Item
    from moto.dynamodb.models.table import Table

    query = Table.query
    query_signature = inspect.signature(query)
    put_item = Table.put_item
    delete_item = Table.delete_item
    update_item = DynamoDBBackend.update_item
    transact_write_items = DynamoDBBackend.transact_write_items
    delete_table = DynamoDBBackend.delete_table

    def partitions(table):
        signature = _Partitions.signature_of(table)
        built = table.__dict__.get(_PARTITIONS)
        if built is None or built.signature != signature:
            built = table.__dict__[_PARTITIONS] = _Partitions(table, signature)
        return built

    def candidates(table, args, kwargs):
        """The items of the queried partition in all_items() order, or None
        to take moto's path."""
        arguments = query_signature.bind(table, *args, **kwargs).arguments
        index_name = arguments.get("index_name")
        if not index_name:
            hash_key = arguments.get("hash_key")
            if not isinstance(hash_key, DynamoType):
                return None
            stored = dict.get(table.items, hash_key)
            if table.range_key_attr is not None:
                items = list(stored.values()) if isinstance(stored, dict) else []
            else:
                items = [stored] if isinstance(stored, Item) else []
            return _sort_like_all_items(items)
        built = partitions(table)
        attr = dict(built.attrs).get(index_name)
        if attr is None:
            return None
        # moto keeps the last condition of a name.
        conditions = dict(arguments.get("hash_key_conditions") or [])
        value = conditions.get(attr)
        if not isinstance(value, DynamoType):
            return None
        pks = set(built.parts[index_name].get(value, ()))
        pks |= built.odd[index_name]
        items = []
        for pk in pks:
            item = _current_item(table, *pk)
            if item is None:
                # Out of step (cannot happen): rebuild at the next query.
                table.__dict__[_PARTITIONS] = None
                return None
            items.append(item)
        return _sort_like_all_items(items)

    def patched_query(self, *args, **kwargs):
        try:
            items = candidates(self, args, kwargs)
        except Exception:
            items = None
        if items is None:
            return query(self, *args, **kwargs)
        self.__dict__["all_items"] = lambda: items
        try:
            return query(self, *args, **kwargs)
        finally:
            self.__dict__.pop("all_items", None)

    def patched_put_item(self, item_attrs, *args, **kwargs):
        try:
            return put_item(self, item_attrs, *args, **kwargs)
        finally:
            _touched(
                self,
                lambda: _request_key(
                    self,
                    {
                        k: item_attrs[k]
                        for k in (self.hash_key_attr, self.range_key_attr)
                        if k is not None and k in item_attrs
                    },
                ),
            )

    def patched_delete_item(self, hash_key, range_key, *args, **kwargs):
        try:
            return delete_item(self, hash_key, range_key, *args, **kwargs)
        finally:
            _touched(
                self,
                lambda: (hash_key, range_key if self.range_key_attr is not None else None),
            )

    def patched_update_item(self, table_name, key, *args, **kwargs):
        try:
            return update_item(self, table_name, key, *args, **kwargs)
        finally:
            table = self.tables.get(table_name)
            if table is None:
                try:
                    table = self.get_table(table_name)
                except Exception:
                    table = None
            if table is not None:
                _touched(table, lambda: _request_key(table, key))

    def patched_transact_write_items(self, transact_items, *args, **kwargs):
        try:
            return transact_write_items(self, transact_items, *args, **kwargs)
        finally:
            keys = None
            try:
                keys = _transaction_keys(self, transact_items)
            except Exception:
                pass
            if keys is None:
                # Unreadable request: drop the partitions of every table.
                for table in list(self.tables.values()):
                    table.__dict__[_PARTITIONS] = None
            else:
                for table, pk in keys:
                    _touched(table, lambda pk=pk: pk)

    def patched_delete_table(self, *args, **kwargs):
        table = delete_table(self, *args, **kwargs)
        if isinstance(table, Table):
            table.__dict__.pop(_PARTITIONS, None)
        return table

    Table.query = patched_query
    Table.put_item = patched_put_item
    Table.delete_item = patched_delete_item
    DynamoDBBackend.update_item = patched_update_item
    DynamoDBBackend.transact_write_items = patched_transact_write_items
    DynamoDBBackend.delete_table = patched_delete_table


def cache_module_list():
    """moto's dispatcher lists its package directory on every request
    (backends.list_of_moto_modules); the list never changes, so list once."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules



class Faults:
    """Faults of DynamoDB and DynamoDB Streams that moto does not have.

    Settings (JSON object; a missing key keeps its value, all start at 0):

      * gsiLagSeconds: a Query of a global secondary index does not see an
        item written (PutItem, UpdateItem, DeleteItem, BatchWriteItem,
        TransactWriteItems) less than this long ago, as if the index had not
        caught up. The item is left out of the answer (DynamoDB would still
        show its previous image, or none for a new item; leaving it out is
        the harsher case for a reader that must find it). Table queries,
        GetItem and ConsistentRead are unaffected, as on DynamoDB.
      * throttle: the fraction of DynamoDB data-plane calls (and of Streams
        GetRecords) refused before moto sees them with HTTP 400 and a
        throttling error, in the JSON shape DynamoDB answers:
        ProvisionedThroughputExceededException or ThrottlingException
        (GetRecords: LimitExceededException). The SDKs retry these.
      * transactionConflict: the fraction of TransactWriteItems refused with
        TransactionCanceledException whose CancellationReasons hold
        TransactionConflict for one action and None for the others, as
        DynamoDB answers when another transaction holds one of the items.
      * transactionThrottle: the fraction of TransactWriteItems refused with
        TransactionCanceledException whose CancellationReasons hold
        ThrottlingError (or, half the time, ProvisionedThroughputExceeded)
        for one action and None for the others, as DynamoDB answers when a
        partition the transaction writes is throttled. The SDKs do not retry
        a TransactionCanceledException; the caller must.
      * loseAnswers, loseAnswersTable: the next loseAnswers successful
        single-item writes (PutItem, UpdateItem, DeleteItem) to the table
        named loseAnswersTable are applied and then answered with HTTP 500
        InternalServerError, as DynamoDB answers when a request "might have
        succeeded"; the SDKs retry it, and the retry meets the state the
        lost attempt left. Counted down, not a fraction, so a test knows
        which write lost its answer; other tables are unaffected.
      * schedulerThrottle: the fraction of EventBridge Scheduler writes
        (CreateSchedule, UpdateSchedule, DeleteSchedule) refused with HTTP 429
        ThrottlingException, as Scheduler answers past its request quota; 1
        is a sustained throttle (minutes of it, as the tests stage). The
        SDKs retry it; the caller must survive their giving up.
      * seed: seeds the random choices (0 = from the clock).

    Counters of the faults injected are in the answer of POST
    /_clockwork/faults."""

    DATA_OPS = frozenset((
        "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan",
        "BatchGetItem", "BatchWriteItem", "TransactWriteItems", "TransactGetItems",
    ))
    WRITE_OPS = frozenset(("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"))

    def __init__(self):
        self.lock = threading.Lock()
        self.lag = 0.0
        self.throttle = 0.0
        self.conflict = 0.0
        self.tx_throttle = 0.0
        self.sched_throttle = 0.0
        self.rng = random.Random()
        self.written = {}  # (table, key) -> monotonic time of the last write
        self.keys = {}  # table -> (hash attribute, range attribute or None)
        self.lose = 0
        self.lose_table = ""
        self.counts = {"throttled": 0, "conflicts": 0, "transactionsThrottled": 0, "hiddenFromIndex": 0, "lostAnswers": 0, "schedulerThrottled": 0}
        self.pruned = time.monotonic()

    def configure(self, settings):
        with self.lock:
            if "gsiLagSeconds" in settings:
                self.lag = max(0.0, float(settings["gsiLagSeconds"]))
            if "throttle" in settings:
                self.throttle = min(1.0, max(0.0, float(settings["throttle"])))
            if "transactionConflict" in settings:
                self.conflict = min(1.0, max(0.0, float(settings["transactionConflict"])))
            if "transactionThrottle" in settings:
                self.tx_throttle = min(1.0, max(0.0, float(settings["transactionThrottle"])))
            if "schedulerThrottle" in settings:
                self.sched_throttle = min(1.0, max(0.0, float(settings["schedulerThrottle"])))
            if "loseAnswers" in settings:
                self.lose = max(0, int(settings["loseAnswers"]))
            if "loseAnswersTable" in settings:
                self.lose_table = str(settings["loseAnswersTable"] or "")
            if settings.get("seed"):
                self.rng.seed(int(settings["seed"]))
            return self.state()

    def state(self):
        return {
            "gsiLagSeconds": self.lag,
            "throttle": self.throttle,
            "transactionConflict": self.conflict,
            "transactionThrottle": self.tx_throttle,
            "schedulerThrottle": self.sched_throttle,
            "loseAnswers": self.lose,
            "loseAnswersTable": self.lose_table,
            "counts": dict(self.counts),
        }

    def chance(self, p):
        return p > 0 and self.rng.random() < p

    # ---- the request path ----

    def before(self, service, op, body):
        """An error answer (status, body) to give instead of moto's, or None."""
        with self.lock:
            if service == "DynamoDBStreams_20120810" and op == "GetRecords":
                if self.chance(self.throttle):
                    self.counts["throttled"] += 1
                    return _error("com.amazonaws.dynamodb.v20120810#LimitExceededException",
                                  "Too many requests for the stream.")
                return None
            if service != "DynamoDB_20120810" or op not in self.DATA_OPS:
                return None
            if self.chance(self.throttle):
                self.counts["throttled"] += 1
                if self.rng.random() < 0.5:
                    return _error(
                        "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                        "The level of configured provisioned throughput for the table was exceeded. "
                        "Consider increasing your provisioning level with the UpdateTable API.")
                return _error(
                    "com.amazonaws.dynamodb.v20120810#ThrottlingException",
                    "Throughput exceeds the current capacity of your table or index. DynamoDB is "
                    "automatically scaling your table or index so please try again shortly.")
            if op == "TransactWriteItems" and self.chance(self.conflict):
                self.counts["conflicts"] += 1
                return self.cancelled(body, {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"})
            if op == "TransactWriteItems" and self.chance(self.tx_throttle):
                self.counts["transactionsThrottled"] += 1
                if self.rng.random() < 0.5:
                    return self.cancelled(body, {"Code": "ProvisionedThroughputExceeded",
                                                 "Message": "The level of configured provisioned throughput for the table was exceeded."})
                return self.cancelled(body, {"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity for one or more global secondary indexes."})
            return None

    def scheduler_refused(self, environ):
        """Whether to refuse this Scheduler write with a throttle."""
        if not environ.get("PATH_INFO", "").startswith("/schedules/"):
            return False
        if environ.get("REQUEST_METHOD") not in ("POST", "PUT", "DELETE"):
            return False
        if "/scheduler/aws4_request" not in environ.get("HTTP_AUTHORIZATION", ""):
            return False
        with self.lock:
            if self.chance(self.sched_throttle):
                self.counts["schedulerThrottled"] += 1
                return True
        return False

    def cancelled(self, body, reason):
        """A TransactionCanceledException with reason for one action (chosen
        at random) and None for the others, as DynamoDB answers."""
        actions = body.get("TransactItems") if isinstance(body, dict) else None
        n = len(actions) if isinstance(actions, list) and actions else 1
        reasons = [{"Code": "None"} for _ in range(n)]
        reasons[self.rng.randrange(n)] = reason
        codes = ", ".join(r["Code"] for r in reasons)
        return _error(
            "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "Transaction cancelled, please refer cancellation reasons for specific reasons [%s]" % codes,
            CancellationReasons=reasons, message_key="Message")

    def after(self, service, op, body, status, answer):
        """Note what a request wrote, learn key schemas, and hide young
        items from index queries. Returns the answer to send."""
        if service != "DynamoDB_20120810" or not isinstance(body, dict):
            return answer
        with self.lock:
            if op == "CreateTable" and status == 200:
                self.learn(body.get("TableName"), body.get("KeySchema"))
            elif op == "DescribeTable" and status == 200:
                try:
                    t = json.loads(answer)["Table"]
                    self.learn(t.get("TableName"), t.get("KeySchema"))
                except Exception:
                    pass
            if status != 200:
                return answer
            if op in self.WRITE_OPS:
                now = time.monotonic()
                for table, key in self.written_keys(op, body):
                    self.written[(table, key)] = now
                if now - self.pruned > 5:
                    self.prune(now)
                return answer
            if op == "Query" and body.get("IndexName") and self.lag > 0:
                return self.hide_young(body.get("TableName"), answer)
        return answer

    SINGLE_WRITES = frozenset(("PutItem", "UpdateItem", "DeleteItem"))

    def lose_answer(self, service, op, body, status):
        """Whether to replace this applied write's answer with a 500."""
        if service != "DynamoDB_20120810" or op not in self.SINGLE_WRITES or status != 200:
            return False
        with self.lock:
            if self.lose <= 0 or not isinstance(body, dict) or body.get("TableName") != self.lose_table:
                return False
            self.lose -= 1
            self.counts["lostAnswers"] += 1
            return True

    def learn(self, table, schema):
        if not table or not isinstance(schema, list):
            return
        h = r = None
        for k in schema:
            if k.get("KeyType") == "HASH":
                h = k.get("AttributeName")
            elif k.get("KeyType") == "RANGE":
                r = k.get("AttributeName")
        if h:
            self.keys[table] = (h, r)

    def key_of(self, table, attrs):
        h, r = self.keys.get(table, ("pk", "sk"))
        if not isinstance(attrs, dict) or h not in attrs:
            return None
        return json.dumps([attrs.get(h), attrs.get(r) if r else None], sort_keys=True)

    def written_keys(self, op, body):
        out = []

        def add(table, attrs):
            k = self.key_of(table, attrs)
            if table and k:
                out.append((table, k))

        if op == "PutItem":
            add(body.get("TableName"), body.get("Item"))
        elif op in ("UpdateItem", "DeleteItem"):
            add(body.get("TableName"), body.get("Key"))
        elif op == "BatchWriteItem":
            for table, reqs in (body.get("RequestItems") or {}).items():
                for req in reqs or []:
                    if "PutRequest" in req:
                        add(table, req["PutRequest"].get("Item"))
                    elif "DeleteRequest" in req:
                        add(table, req["DeleteRequest"].get("Key"))
        elif op == "TransactWriteItems":
            for action in body.get("TransactItems") or []:
                if "Put" in action:
                    add(action["Put"].get("TableName"), action["Put"].get("Item"))
                elif "Update" in action:
                    add(action["Update"].get("TableName"), action["Update"].get("Key"))
                elif "Delete" in action:
                    add(action["Delete"].get("TableName"), action["Delete"].get("Key"))
        return out

    def prune(self, now):
        horizon = now - max(self.lag, 1.0)
        self.written = {k: t for k, t in self.written.items() if t >= horizon}
        self.pruned = now

    def hide_young(self, table, answer):
        try:
            doc = json.loads(answer)
        except Exception:
            return answer
        items = doc.get("Items")
        if not isinstance(items, list):
            return answer
        now = time.monotonic()
        kept = []
        for it in items:
            t = self.written.get((table, self.key_of(table, it)))
            if t is not None and now - t < self.lag:
                self.counts["hiddenFromIndex"] += 1
                continue
            kept.append(it)
        if len(kept) == len(items):
            return answer
        doc["Items"] = kept
        doc["Count"] = len(kept)
        return json.dumps(doc).encode()


class Capacity:
    """ConsumedCapacity of write calls as DynamoDB reports it, which moto
    does not (it answers a constant 1.0 for single writes and nothing for
    TransactWriteItems). For PutItem, UpdateItem, DeleteItem and
    TransactWriteItems that ask for it (ReturnConsumedCapacity TOTAL or
    INDEXES), the answer's ConsumedCapacity is replaced by one computed
    from the items before and after the call with DynamoDB's documented
    rules (developer guide: "Read/write capacity unit consumption",
    "Global secondary indexes: write capacity units", "Capacity management
    for transactions"):

      * the table: one write unit per 1 KB (rounded up) of the larger of
        the item before and after (a delete: the item deleted; at least 1);
        in a transaction every action counts twice, a ConditionCheck too;
      * each global secondary index: a put of the new entry when the item
        enters it, a delete of the old one when it leaves, both when an
        index key attribute changes, one write when only projected
        attributes change, nothing when neither the keys nor the projected
        attributes change; each entry (table key, index key and projected
        attributes) one unit per 1 KB, rounded up. Index writes are not
        doubled in transactions (they are propagated after the commit).

    Item sizes: attribute name lengths plus value sizes (strings and
    binaries their bytes, numbers one byte per two significant digits plus
    one, booleans and nulls one byte, maps and lists 3 bytes plus their
    elements). A refused call (a failed condition) reports nothing here, as
    DynamoDB omits ConsumedCapacity from error answers."""

    OPS = frozenset(("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"))

    @staticmethod
    def backend(environ):
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends

        region = "us-east-1"
        auth = environ.get("HTTP_AUTHORIZATION", "")
        if "Credential=" in auth:
            parts = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/")
            if len(parts) >= 3:
                region = parts[2]
        return dynamodb_backends[DEFAULT_ACCOUNT_ID][region]

    @staticmethod
    def value_size(v):
        t, val = v.type, v.value
        if t == "S":
            return len(val.encode("utf-8"))
        if t == "N":
            digits = str(val).lstrip("-+").replace(".", "").split("e")[0].split("E")[0].strip("0")
            return (len(digits) + 1) // 2 + 1
        if t == "B":
            if isinstance(val, (bytes, bytearray)):
                return len(val)
            import base64
            return len(base64.b64decode(val))
        if t in ("BOOL", "NULL"):
            return 1
        from moto.dynamodb.models.dynamo_type import DynamoType
        if t == "M":
            return 3 + sum(len(k.encode("utf-8")) + Capacity.value_size(DynamoType(x)) for k, x in val.items())
        if t == "L":
            return 3 + sum(1 + Capacity.value_size(x if isinstance(x, DynamoType) else DynamoType(x)) for x in val)
        if t in ("SS", "NS", "BS"):
            return sum(Capacity.value_size(DynamoType({t[0]: x})) for x in val)
        return len(str(val))

    @staticmethod
    def size(attrs):
        return sum(len(k.encode("utf-8")) + Capacity.value_size(v) for k, v in attrs.items())

    @staticmethod
    def units(size):
        return max(1, -(-size // 1024))

    @staticmethod
    def entry(table, gsi, attrs):
        """The index entry of an item (attrs) in gsi, or None."""
        if attrs is None:
            return None
        keys = [k["AttributeName"] for k in gsi.schema]
        if any(k not in attrs for k in keys):
            return None
        proj = (gsi.projection or {}).get("ProjectionType", "ALL")
        base = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
        if proj == "ALL":
            names = list(attrs)
        else:
            names = base + keys + (list((gsi.projection or {}).get("NonKeyAttributes", [])) if proj == "INCLUDE" else [])
        return {n: attrs[n] for n in names if n in attrs}

    def plan(self, environ, op, body):
        """[(table, primary key, action, old attrs)] for a write that asks
        for capacity, or None."""
        if op not in self.OPS or not isinstance(body, dict):
            return None
        if op == "TransactWriteItems":
            mode = body.get("ReturnConsumedCapacity", "NONE")
            actions = []
            for a in body.get("TransactItems") or []:
                if isinstance(a, dict) and len(a) == 1:
                    kind, spec = next(iter(a.items()))
                    actions.append((kind, spec))
        else:
            mode = body.get("ReturnConsumedCapacity", "NONE")
            actions = [({"PutItem": "Put", "UpdateItem": "Update", "DeleteItem": "Delete"}[op], body)]
        if mode not in ("TOTAL", "INDEXES"):
            return None
        try:
            backend = self.backend(environ)
            out = []
            for kind, spec in actions:
                table = backend.get_table(spec["TableName"])
                key = _request_key(table, spec["Item"] if kind == "Put" else spec["Key"])
                if key is None:
                    return None
                old = _current_item(table, key[0], key[1])
                out.append((table, key, kind, dict(old.attrs) if old is not None else None))
            return (mode, op == "TransactWriteItems", out)
        except Exception:
            return None

    def answer(self, plan, status, answer):
        if plan is None or status != 200:
            return answer
        mode, tx, actions = plan
        per_table = {}
        for table, key, kind, old in actions:
            cur = _current_item(table, key[0], key[1])
            new = dict(cur.attrs) if cur is not None else None
            t = per_table.setdefault(table.name, {"table": 0.0, "gsi": {}})
            if kind == "ConditionCheck":
                size = self.size(old) if old else 0
            elif kind == "Delete":
                size = self.size(old) if old else 0
            else:
                size = max(self.size(old) if old else 0, self.size(new) if new else 0)
            t["table"] += self.units(size) * (2 if tx else 1)
            if kind == "ConditionCheck":
                continue
            for gsi in table.global_indexes:
                before, after = self.entry(table, gsi, old), self.entry(table, gsi, new)
                keys = [k["AttributeName"] for k in gsi.schema]
                cost = 0
                if before is None and after is not None:
                    cost = self.units(self.size(after))
                elif before is not None and after is None:
                    cost = self.units(self.size(before))
                elif before is not None and after is not None:
                    if any(before[k] != after[k] for k in keys):
                        cost = self.units(self.size(before)) + self.units(self.size(after))
                    elif before != after:
                        cost = self.units(max(self.size(before), self.size(after)))
                if cost:
                    t["gsi"][gsi.name] = t["gsi"].get(gsi.name, 0.0) + cost
        try:
            doc = json.loads(answer or b"{}")
        except Exception:
            return answer
        caps = []
        for name, t in per_table.items():
            total = t["table"] + sum(t["gsi"].values())
            c = {"TableName": name, "CapacityUnits": total}
            if tx:
                c["WriteCapacityUnits"] = total
            if mode == "INDEXES":
                c["Table"] = {"CapacityUnits": t["table"]}
                if tx:
                    c["Table"]["WriteCapacityUnits"] = t["table"]
                if t["gsi"]:
                    c["GlobalSecondaryIndexes"] = {
                        n: ({"CapacityUnits": u, "WriteCapacityUnits": u} if tx else {"CapacityUnits": u})
                        for n, u in t["gsi"].items()
                    }
            caps.append(c)
        doc["ConsumedCapacity"] = caps if tx else (caps[0] if caps else None)
        if doc["ConsumedCapacity"] is None:
            del doc["ConsumedCapacity"]
        return json.dumps(doc).encode()


def _error(error_type, message, message_key="message", **extra):
    doc = {"__type": error_type, message_key: message}
    doc.update(extra)
    return 400, json.dumps(doc).encode()


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
                start_response("%d Bad Request" % code, [
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
