"""TransactWriteItems copies only the items it touches, to put them back when it
fails (moto deep-copied each table it writes, once per action)."""

import copy


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
