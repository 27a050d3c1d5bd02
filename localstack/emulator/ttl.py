"""Time to Live. DynamoDB deletes an item once the time in its TTL attribute (a
Number of seconds since the epoch) has passed, in the background, typically
within a few days, and writes each deletion to the table's stream as a REMOVE
record whose userIdentity is the service's ({"PrincipalId":
"dynamodb.amazonaws.com", "Type": "Service"} in GetRecords, as the DynamoDB
Streams API reference spells Identity; Lambda's event spells the same
members principalId and type); an attribute that is not a Number, or a time more
than five years in the past, never expires the item (DynamoDB developer guide,
"Using time to live (TTL) in DynamoDB" and "DynamoDB Streams and Time to
Live"). Until the deletion, reads still return the item, which is why the
adapter filters expired items itself.

moto keeps the TTL setting (UpdateTimeToLive, DescribeTimeToLive) and deletes
nothing. The sweeper below deletes, every interval (1 s, or
CLOCKWORK_EMULATOR_TTL_INTERVAL seconds), every expired item of each table
whose TTL is enabled, under the server's request lock, so each deletion is
atomic to the clients and is seen on the stream with the service's identity."""

import threading
import time

TTL_IDENTITY = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
FIVE_YEARS = 5 * 365 * 24 * 3600


def expired(item, attribute, now):
    """Whether a moto Item has expired at now (seconds since the epoch)."""
    value = item.attrs.get(attribute)
    if value is None or value.type != "N":
        return False
    try:
        at = float(value.value)
    except (TypeError, ValueError):
        return False
    return now - FIVE_YEARS <= at <= now


def sweep(now=None):
    """Deletes every expired item of every table with TTL enabled, with a REMOVE
    stream record carrying the TTL identity; returns how many it deleted."""
    from moto.dynamodb.models import dynamodb_backends

    now = time.time() if now is None else now
    deleted = 0
    for account in list(dynamodb_backends.values()):
        for backend in list(account.values()):
            for table in list(backend.tables.values()):
                ttl = getattr(table, "ttl", {}) or {}
                attribute = ttl.get("AttributeName")
                if ttl.get("TimeToLiveStatus") != "ENABLED" or not attribute:
                    continue
                victims = [it for it in list(table.all_items()) if expired(it, attribute, now)]
                for item in victims:
                    before = len(table.stream_shard.items) if table.stream_shard is not None else 0
                    table.delete_item(item.hash_key, item.range_key)
                    deleted += 1
                    shard = table.stream_shard
                    if shard is not None and len(shard.items) > before:
                        shard.items[-1].record["userIdentity"] = dict(TTL_IDENTITY)
    return deleted


def start_sweeper(lock, interval=1.0):
    """Runs sweep under lock every interval seconds, in a daemon thread."""

    def run():
        while True:
            time.sleep(interval)
            try:
                with lock:
                    sweep()
            except Exception as err:  # keep sweeping; report once per failure
                print("ttl sweep failed: %r" % (err,), flush=True)

    thread = threading.Thread(target=run, name="ttl-sweeper", daemon=True)
    thread.start()
    return thread
