"""emulator/streams.py against DynamoDB Streams ("Change data capture for
DynamoDB Streams": one stream record per item-level change): an UpdateItem that
creates its item writes one INSERT record holding the whole new image."""

import unittest

from emulator.tests import support


class UpdateStream(unittest.TestCase):
    def test_an_update_that_creates_an_item_writes_one_insert(self):
        db = support.client()
        table = support.new_table(db, gsi=False)
        db.update_item(TableName=table, Key={"pk": {"S": "p"}, "sk": {"S": "s"}},
                       UpdateExpression="SET #v = :v", ExpressionAttributeNames={"#v": "version"},
                       ExpressionAttributeValues={":v": {"N": "1"}})
        db.update_item(TableName=table, Key={"pk": {"S": "p"}, "sk": {"S": "s"}},
                       UpdateExpression="SET #v = :v", ExpressionAttributeNames={"#v": "version"},
                       ExpressionAttributeValues={":v": {"N": "2"}})
        records = support.stream_records(db, table)
        self.assertEqual([r["eventName"] for r in records], ["INSERT", "MODIFY"])
        self.assertEqual(records[0]["dynamodb"]["NewImage"]["version"], {"N": "1"})
        self.assertEqual(records[1]["dynamodb"]["OldImage"]["version"], {"N": "1"})


if __name__ == "__main__":
    unittest.main()
