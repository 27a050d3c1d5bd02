"""emulator/ttl.py against DynamoDB's Time to Live ("Using time to live (TTL) in
DynamoDB", "DynamoDB Streams and Time to Live"): an item whose TTL attribute, a
Number of epoch seconds, has passed is deleted in the background and its REMOVE
stream record names the service as its user identity; an attribute of another
type, or a time more than five years in the past, never expires the item."""

import time
import unittest

from emulator.tests import support


class TimeToLive(unittest.TestCase):
    def setUp(self):
        self.db = support.client()
        self.table = support.new_table(self.db, gsi=False)
        self.db.update_time_to_live(TableName=self.table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"})

    def put(self, sk, expires):
        item = {"pk": {"S": "p"}, "sk": {"S": sk}}
        if expires is not None:
            item["expiresAt"] = expires
        self.db.put_item(TableName=self.table, Item=item)

    def present(self, sk):
        return "Item" in self.db.get_item(TableName=self.table, Key={"pk": {"S": "p"}, "sk": {"S": sk}}, ConsistentRead=True)

    def test_expired_items_are_deleted_with_the_service_identity(self):
        now = int(time.time())
        self.put("past", {"N": str(now - 60)})
        self.put("future", {"N": str(now + 3600)})
        self.put("string", {"S": str(now - 60)})
        self.put("ancient", {"N": str(now - 6 * 365 * 24 * 3600)})
        self.put("none", None)
        self.assertTrue(support.eventually(lambda: not self.present("past")), "the expired item was never deleted")
        for sk in ("future", "string", "ancient", "none"):
            self.assertTrue(self.present(sk), sk + " was deleted")
        removes = [r for r in support.stream_records(self.db, self.table) if r["eventName"] == "REMOVE"]
        self.assertEqual(len(removes), 1)
        self.assertEqual(removes[0]["dynamodb"]["Keys"]["sk"], {"S": "past"})
        self.assertEqual(removes[0]["userIdentity"], {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"})

    def test_a_callers_delete_has_no_identity(self):
        self.put("mine", None)
        self.db.delete_item(TableName=self.table, Key={"pk": {"S": "p"}, "sk": {"S": "mine"}})
        removes = [r for r in support.stream_records(self.db, self.table) if r["eventName"] == "REMOVE"]
        self.assertEqual(len(removes), 1)
        self.assertNotIn("userIdentity", removes[0])

    def test_nothing_expires_without_ttl_enabled(self):
        self.db.update_time_to_live(TableName=self.table, TimeToLiveSpecification={"Enabled": False, "AttributeName": "expiresAt"})
        self.put("past", {"N": str(int(time.time()) - 60)})
        time.sleep(2.5)
        self.assertTrue(self.present("past"))


if __name__ == "__main__":
    unittest.main()
