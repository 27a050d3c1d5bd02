"""An UpdateItem that creates its item emits one INSERT stream record, as DynamoDB
does (DynamoDB Streams developer guide: one record per item-level change)."""

import threading


def patch_update_stream():
    """Drop the stream record of the placeholder that moto's update_item
    puts before applying the update expression to a new item."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    state = threading.local()
    update_item = DynamoDBBackend.update_item
    put_item = Table.put_item

    def patched_update_item(self, *args, **kwargs):
        state.updating = True
        try:
            return update_item(self, *args, **kwargs)
        finally:
            state.updating = False

    def patched_put_item(self, item_attrs, *args, **kwargs):
        if getattr(state, "updating", False) and not args and not kwargs:
            shard, self.stream_shard = self.stream_shard, None
            try:
                return put_item(self, item_attrs)
            finally:
                self.stream_shard = shard
        return put_item(self, item_attrs, *args, **kwargs)

    DynamoDBBackend.update_item = patched_update_item
    Table.put_item = patched_put_item
