"""emulator/faults.py against the faults DynamoDB documents: an index that lags
its table ("Global secondary indexes: data synchronization", eventually
consistent), a transaction cancelled for throttling (TransactionCanceledException
with ThrottlingError or ProvisionedThroughputExceeded among its
CancellationReasons, which the SDKs do not retry), a call throttled before it
is applied, and an answer lost after the write (HTTP 500 InternalServerError)."""

import time
import unittest

from botocore.exceptions import ClientError

from emulator.tests import support


class Faults(unittest.TestCase):
    def setUp(self):
        self.db = support.client()
        self.table = support.new_table(self.db)

    def tearDown(self):
        support.faults(support.FAULTS_OFF)

    def test_an_index_lags_its_table(self):
        support.faults({"gsiLagSeconds": 2})
        self.db.put_item(TableName=self.table, Item={"pk": {"S": "p"}, "sk": {"S": "s"}, "gsi1_pk": {"S": "x"}, "gsi1_sk": {"S": "s"}})
        q = dict(TableName=self.table, IndexName="gsi1", KeyConditionExpression="gsi1_pk = :p", ExpressionAttributeValues={":p": {"S": "x"}})
        self.assertEqual(self.db.query(**q)["Items"], [])
        self.assertIn("Item", self.db.get_item(TableName=self.table, Key={"pk": {"S": "p"}, "sk": {"S": "s"}}, ConsistentRead=True))
        time.sleep(2.2)
        self.assertEqual(len(self.db.query(**q)["Items"]), 1)

    def test_a_throttled_transaction_is_cancelled_with_its_reason(self):
        support.faults({"transactionThrottle": 1})
        with self.assertRaises(ClientError) as err:
            self.db.transact_write_items(TransactItems=[
                {"Put": {"TableName": self.table, "Item": {"pk": {"S": "p"}, "sk": {"S": "a"}}}},
                {"Put": {"TableName": self.table, "Item": {"pk": {"S": "p"}, "sk": {"S": "b"}}}},
            ])
        self.assertEqual(err.exception.response["Error"]["Code"], "TransactionCanceledException")
        reasons = [r.get("Code") for r in err.exception.response["CancellationReasons"]]
        self.assertTrue({"ThrottlingError", "ProvisionedThroughputExceeded"} & set(reasons), reasons)
        self.assertEqual(reasons.count("None"), 1)
        self.assertNotIn("Item", self.db.get_item(TableName=self.table, Key={"pk": {"S": "p"}, "sk": {"S": "a"}}, ConsistentRead=True))

    def test_a_throttled_call_is_refused_before_it_is_applied(self):
        support.faults({"throttle": 1})
        with self.assertRaises(ClientError) as err:
            self.db.put_item(TableName=self.table, Item={"pk": {"S": "p"}, "sk": {"S": "t"}})
        self.assertIn(err.exception.response["Error"]["Code"], ("ProvisionedThroughputExceededException", "ThrottlingException"))
        support.faults({"throttle": 0})
        self.assertNotIn("Item", self.db.get_item(TableName=self.table, Key={"pk": {"S": "p"}, "sk": {"S": "t"}}, ConsistentRead=True))

    def test_a_lost_answer_follows_the_write(self):
        support.faults({"loseAnswers": 1, "loseAnswersTable": self.table})
        with self.assertRaises(ClientError) as err:
            self.db.put_item(TableName=self.table, Item={"pk": {"S": "p"}, "sk": {"S": "l"}})
        self.assertEqual(err.exception.response["ResponseMetadata"]["HTTPStatusCode"], 500)
        self.assertIn("Item", self.db.get_item(TableName=self.table, Key={"pk": {"S": "p"}, "sk": {"S": "l"}}, ConsistentRead=True))


if __name__ == "__main__":
    unittest.main()
