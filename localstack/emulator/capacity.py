"""The consumed capacity DynamoDB reports (ReturnConsumedCapacity), by its
documented rules for read and write request units."""

import json

from .transactions import _current_item, _request_key


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
