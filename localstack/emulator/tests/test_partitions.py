"""emulator/partitions.py against Query ("Querying tables in DynamoDB": a query
reads the items of one partition key value, of the table or of an index, in
sort key order): after puts, updates that move an item between index
partitions, and deletes, each query answers exactly that partition's items."""

import unittest

from emulator.tests import support


class Partitions(unittest.TestCase):
    def test_queries_read_one_partition_of_the_table_and_of_an_index(self):
        db = support.client()
        table = support.new_table(db)

        def put(pk, sk, ix):
            item = {"pk": {"S": pk}, "sk": {"S": sk}}
            if ix:
                item["gsi1_pk"], item["gsi1_sk"] = {"S": ix}, {"S": sk}
            db.put_item(TableName=table, Item=item)

        for i in range(5):
            put("a", "s%d" % i, "x" if i % 2 == 0 else "y")
            put("b", "s%d" % i, None)
        put("a", "s2", "y")  # moves from x to y
        db.delete_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"S": "s4"}})

        def table_query(pk):
            items = db.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": pk}},
                             ConsistentRead=True)["Items"]
            return [it["sk"]["S"] for it in items]

        def index_query(ix):
            items = db.query(TableName=table, IndexName="gsi1", KeyConditionExpression="gsi1_pk = :p",
                             ExpressionAttributeValues={":p": {"S": ix}})["Items"]
            return [it["sk"]["S"] for it in items]

        self.assertEqual(table_query("a"), ["s0", "s1", "s2", "s3"])
        self.assertEqual(table_query("b"), ["s0", "s1", "s2", "s3", "s4"])
        self.assertEqual(index_query("x"), ["s0"])
        self.assertEqual(index_query("y"), ["s1", "s2", "s3"])
        self.assertEqual(index_query("none"), [])


if __name__ == "__main__":
    unittest.main()
