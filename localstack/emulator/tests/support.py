"""What every test module shares: clients of the running emulator, a fresh
table in the adapter's layout, and the fault settings endpoint."""

import json
import os
import time
import urllib.request
import uuid

import boto3
from botocore.config import Config

ENDPOINT = os.environ.get("CLOCKWORK_EMULATOR_ENDPOINT", "")


def client(service="dynamodb", attempts=1):
    """A client that tries once: the tests look at single answers."""
    if not ENDPOINT:
        raise RuntimeError("CLOCKWORK_EMULATOR_ENDPOINT is not set (run through TestEmulatorModules)")
    return boto3.client(
        service,
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}),
    )


def new_table(db, gsi=True):
    """Creates a table keyed pk/sk with a stream (NEW_AND_OLD_IMAGES) and a
    keys-only index gsi1 on gsi1_pk/gsi1_sk; returns its name."""
    name = "emu-" + uuid.uuid4().hex[:12]
    attrs = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}]
    kwargs = {}
    if gsi:
        attrs += [{"AttributeName": "gsi1_pk", "AttributeType": "S"}, {"AttributeName": "gsi1_sk", "AttributeType": "S"}]
        kwargs["GlobalSecondaryIndexes"] = [{
            "IndexName": "gsi1",
            "KeySchema": [{"AttributeName": "gsi1_pk", "KeyType": "HASH"}, {"AttributeName": "gsi1_sk", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        }]
    db.create_table(
        TableName=name,
        AttributeDefinitions=attrs,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        **kwargs,
    )
    return name


def stream_records(db, table):
    """Every record of the table's stream, oldest first."""
    streams = client("dynamodbstreams")
    arn = db.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    out = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            page = streams.get_records(ShardIterator=it, Limit=1000)
            out += page["Records"]
            if not page["Records"]:
                break
            it = page.get("NextShardIterator")
    return out


def faults(settings):
    """Sets the emulator's faults (POST /_clockwork/faults); returns the answer."""
    req = urllib.request.Request(ENDPOINT + "/_clockwork/faults", data=json.dumps(settings).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as res:
        return json.loads(res.read())


FAULTS_OFF = {"gsiLagSeconds": 0, "throttle": 0, "transactionConflict": 0, "transactionThrottle": 0,
              "loseAnswers": 0, "schedulerThrottle": 0}


def eventually(cond, seconds=10.0):
    """Polls cond until it is true or seconds pass; returns its last value."""
    deadline = time.time() + seconds
    while True:
        value = cond()
        if value or time.time() > deadline:
            return value
        time.sleep(0.1)
