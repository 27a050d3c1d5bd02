"""emulator/capacity.py against "Read/write capacity unit consumption" and
"Capacity management for transactions": a write costs one unit per KB (rounded
up) of the larger of the item before and after, each action of a transaction
twice, and each index entry the write puts or deletes one unit per KB."""

import unittest

from emulator.tests import support


def units(answer):
    return answer["ConsumedCapacity"]["CapacityUnits"]


class Capacity(unittest.TestCase):
    def test_write_units_follow_the_documented_rules(self):
        db = support.client()
        table = support.new_table(db)
        big = {"pk": {"S": "p"}, "sk": {"S": "big"}, "data": {"S": "x" * 1500}}
        self.assertEqual(units(db.put_item(TableName=table, Item=big, ReturnConsumedCapacity="TOTAL")), 2.0)
        small = {"pk": {"S": "p"}, "sk": {"S": "big"}}
        # Replacing a 1.5 KB item with a small one costs the larger: 2.
        self.assertEqual(units(db.put_item(TableName=table, Item=small, ReturnConsumedCapacity="TOTAL")), 2.0)
        indexed = {"pk": {"S": "p"}, "sk": {"S": "ix"}, "gsi1_pk": {"S": "x"}, "gsi1_sk": {"S": "1"}}
        # The table's unit and the index entry's.
        self.assertEqual(units(db.put_item(TableName=table, Item=indexed, ReturnConsumedCapacity="TOTAL")), 2.0)
        tx = db.transact_write_items(TransactItems=[
            {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "t1"}}}},
            {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "t2"}}}},
        ], ReturnConsumedCapacity="TOTAL")
        self.assertEqual(sum(c["CapacityUnits"] for c in tx["ConsumedCapacity"]), 4.0)


if __name__ == "__main__":
    unittest.main()
