"""emulator/transactions.py against TransactWriteItems ("Amazon DynamoDB
Transactions: How it works": all or nothing): a transaction whose condition
fails writes none of its actions and names the failing one in
CancellationReasons, and the items it touched keep their values; two actions on
one item are refused (ValidationException), as DynamoDB refuses them."""

import unittest

from botocore.exceptions import ClientError

from emulator.tests import support


class Transactions(unittest.TestCase):
    def test_a_failed_condition_writes_nothing(self):
        db = support.client()
        table = support.new_table(db, gsi=False)
        db.put_item(TableName=table, Item={"pk": {"S": "p"}, "sk": {"S": "a"}, "n": {"N": "1"}})
        db.put_item(TableName=table, Item={"pk": {"S": "p"}, "sk": {"S": "c"}})
        with self.assertRaises(ClientError) as err:
            db.transact_write_items(TransactItems=[
                {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "a"}, "n": {"N": "2"}}}},
                {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "b"}, "n": {"N": "2"}}}},
                {"ConditionCheck": {"TableName": table, "Key": {"pk": {"S": "p"}, "sk": {"S": "c"}},
                                    "ConditionExpression": "attribute_not_exists(pk)"}},
            ])
        self.assertEqual(err.exception.response["Error"]["Code"], "TransactionCanceledException")
        reasons = [r.get("Code") for r in err.exception.response["CancellationReasons"]]
        self.assertEqual(reasons, ["None", "None", "ConditionalCheckFailed"])
        a = db.get_item(TableName=table, Key={"pk": {"S": "p"}, "sk": {"S": "a"}}, ConsistentRead=True)["Item"]
        self.assertEqual(a["n"], {"N": "1"})
        self.assertNotIn("Item", db.get_item(TableName=table, Key={"pk": {"S": "p"}, "sk": {"S": "b"}}, ConsistentRead=True))

    def test_two_actions_on_one_item_are_refused(self):
        db = support.client()
        table = support.new_table(db, gsi=False)
        with self.assertRaises(ClientError) as err:
            db.transact_write_items(TransactItems=[
                {"Put": {"TableName": table, "Item": {"pk": {"S": "p"}, "sk": {"S": "a"}}}},
                {"ConditionCheck": {"TableName": table, "Key": {"pk": {"S": "p"}, "sk": {"S": "a"}},
                                    "ConditionExpression": "attribute_not_exists(pk)"}},
            ])
        self.assertEqual(err.exception.response["Error"]["Code"], "ValidationException")


if __name__ == "__main__":
    unittest.main()
