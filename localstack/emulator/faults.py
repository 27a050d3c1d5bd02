"""The faults DynamoDB, DynamoDB Streams and EventBridge Scheduler have and moto
does not: lagging global secondary indexes (eventually consistent, DynamoDB
developer guide), throttling, transactions cancelled for conflicts or
throttling (TransactionCanceledException), answers lost after the write
(InternalServerError), Scheduler writes throttled (429)."""

import json
import random
import threading
import time


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
        # ClientRequestTokens of the transactions throttled: the SDK sends a
        # request again with the same token when the transport fails under
        # it (aws-sdk-go-v2#2737), which is not another attempt of the caller.
        self.throttled_tokens = set()
        # ClientRequestTokens of the transactions applied, and when: DynamoDB
        # answers a repeat of one within 10 minutes as done, applying
        # nothing (moto applies it again and fails its conditions).
        self.applied_tx = {}
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
            if service == "DynamoDB_20120810" and op == "TransactWriteItems" and isinstance(body, dict) \
                    and body.get("ClientRequestToken") in self.applied_tx:
                return 200, b"{}"
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
                token = body.get("ClientRequestToken") if isinstance(body, dict) else None
                if not token or token not in self.throttled_tokens:
                    self.counts["transactionsThrottled"] += 1
                    if token:
                        if len(self.throttled_tokens) > 100000:
                            self.throttled_tokens.clear()
                        self.throttled_tokens.add(token)
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
            if op == "TransactWriteItems" and body.get("ClientRequestToken"):
                self.applied_tx[body["ClientRequestToken"]] = time.monotonic()
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
        self.applied_tx = {k: t for k, t in self.applied_tx.items() if t >= now - 600}
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


def _error(error_type, message, message_key="message", **extra):
    doc = {"__type": error_type, message_key: message}
    doc.update(extra)
    return 400, json.dumps(doc).encode()
