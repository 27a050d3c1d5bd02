"""Query reads only the items of the queried partition, of the table or of a
secondary index kept up to date on every write (DynamoDB Query reads one
partition key's items), with the results moto gives."""


from .transactions import _current_item, _request_key, _transaction_keys


class _Partitions:
    """For one Table object: (index, value of its hash key) -> primary keys
    of the items that have that value, for the indexes with one hash key
    attribute. An item whose value cannot be hashed (not a scalar) is listed
    under every value of that index (moto compares it itself)."""

    ODD = object()

    def __init__(self, table, signature):
        self.signature = signature
        self.attrs = signature[2]
        self.parts = {name: {} for name, _ in self.attrs}
        self.odd = {name: set() for name, _ in self.attrs}
        self.where = {}
        for stored in table.items.values():
            items = stored.values() if table.range_key_attr is not None else [stored]
            for item in items:
                self.add((item.hash_key, item.range_key), item)

    def __deepcopy__(self, memo):
        # A copied table (a backup, a restored table) builds its own.
        return None

    def __copy__(self):
        return None

    @staticmethod
    def signature_of(table):
        attrs = {}
        for index in table.all_indexes():
            hashes = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"]
            # moto resolves an index name to the last index of that name.
            attrs.pop(index.name, None)
            if len(hashes) == 1:
                attrs[index.name] = hashes[0]
        return (table.hash_key_attr, table.range_key_attr, tuple(attrs.items()))

    def add(self, pk, item):
        from moto.dynamodb.models.dynamo_type import DynamoType

        entries = []
        for name, attr in self.attrs:
            value = item.attrs.get(attr)
            if value is None:
                continue
            try:
                # A copy: the stored value may be changed in place later.
                value = DynamoType(value)
                hash(value)
            except Exception:
                self.odd[name].add(pk)
                entries.append((name, self.ODD))
                continue
            self.parts[name].setdefault(value, set()).add(pk)
            entries.append((name, value))
        if entries:
            self.where[pk] = tuple(entries)

    def refresh(self, table, pk):
        for name, value in self.where.pop(pk, ()):
            if value is self.ODD:
                self.odd[name].discard(pk)
                continue
            pks = self.parts[name].get(value)
            if pks is not None:
                pks.discard(pk)
                if not pks:
                    del self.parts[name][value]
        item = _current_item(table, *pk)
        if item is not None:
            self.add(pk, item)


_PARTITIONS = "_clockwork_partitions"


def _sort_like_all_items(items):
    # The key of moto's Table.all_items.
    return sorted(
        items,
        key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key,
    )


def _touched(table, key_of):
    """Update the partitions of table, if built, for the key key_of()
    returns; drop them (rebuilt at the next index query) if there is no such
    key (a malformed request) or the update fails."""
    if table.__dict__.get(_PARTITIONS) is None:
        return
    try:
        pk = key_of()
        if pk is not None:
            table.__dict__[_PARTITIONS].refresh(table, pk)
            return
    except Exception:
        pass
    table.__dict__[_PARTITIONS] = None


def patch_query_partitions():
    """Let Query read only the queried partition instead of the whole table.

    moto's Table.query takes its candidates from all_items(), which lists
    and sorts every item of the table, then keeps those whose hash key
    matches. During a query whose partition is known, all_items() here
    returns only that partition's items, in the same order, and moto's own
    code does the rest (it still checks every key condition), so answers
    are unchanged:

      * on the table, the items under the hash key in table.items;
      * on a secondary index with one hash key attribute, queried with
        that attribute equal to a value, the items listed for that value in
        a _Partitions kept on the Table object. It is built at the first
        such query and updated for the written key after every write, even
        a failed one: Table.put_item and Table.delete_item (PutItem,
        BatchWriteItem, PartiQL, the placeholder of an UpdateItem),
        update_item (changes the stored item in place) and
        transact_write_items (after its rollback). It is rebuilt when the
        table's indexes change; a new table (created, restored, re-created
        under the same name) starts without one, and a deleted table's is
        dropped.

    Anything else (no hash key value, an index with several hash key
    attributes, a value that cannot be hashed) takes moto's path."""
    import inspect

    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType, Item
    from moto.dynamodb.models.table import Table

    query = Table.query
    query_signature = inspect.signature(query)
    put_item = Table.put_item
    delete_item = Table.delete_item
    update_item = DynamoDBBackend.update_item
    transact_write_items = DynamoDBBackend.transact_write_items
    delete_table = DynamoDBBackend.delete_table

    def partitions(table):
        signature = _Partitions.signature_of(table)
        built = table.__dict__.get(_PARTITIONS)
        if built is None or built.signature != signature:
            built = table.__dict__[_PARTITIONS] = _Partitions(table, signature)
        return built

    def candidates(table, args, kwargs):
        """The items of the queried partition in all_items() order, or None
        to take moto's path."""
        arguments = query_signature.bind(table, *args, **kwargs).arguments
        index_name = arguments.get("index_name")
        if not index_name:
            hash_key = arguments.get("hash_key")
            if not isinstance(hash_key, DynamoType):
                return None
            stored = dict.get(table.items, hash_key)
            if table.range_key_attr is not None:
                items = list(stored.values()) if isinstance(stored, dict) else []
            else:
                items = [stored] if isinstance(stored, Item) else []
            return _sort_like_all_items(items)
        built = partitions(table)
        attr = dict(built.attrs).get(index_name)
        if attr is None:
            return None
        # moto keeps the last condition of a name.
        conditions = dict(arguments.get("hash_key_conditions") or [])
        value = conditions.get(attr)
        if not isinstance(value, DynamoType):
            return None
        pks = set(built.parts[index_name].get(value, ()))
        pks |= built.odd[index_name]
        items = []
        for pk in pks:
            item = _current_item(table, *pk)
            if item is None:
                # Out of step (cannot happen): rebuild at the next query.
                table.__dict__[_PARTITIONS] = None
                return None
            items.append(item)
        return _sort_like_all_items(items)

    def patched_query(self, *args, **kwargs):
        try:
            items = candidates(self, args, kwargs)
        except Exception:
            items = None
        if items is None:
            return query(self, *args, **kwargs)
        self.__dict__["all_items"] = lambda: items
        try:
            return query(self, *args, **kwargs)
        finally:
            self.__dict__.pop("all_items", None)

    def patched_put_item(self, item_attrs, *args, **kwargs):
        try:
            return put_item(self, item_attrs, *args, **kwargs)
        finally:
            _touched(
                self,
                lambda: _request_key(
                    self,
                    {
                        k: item_attrs[k]
                        for k in (self.hash_key_attr, self.range_key_attr)
                        if k is not None and k in item_attrs
                    },
                ),
            )

    def patched_delete_item(self, hash_key, range_key, *args, **kwargs):
        try:
            return delete_item(self, hash_key, range_key, *args, **kwargs)
        finally:
            _touched(
                self,
                lambda: (hash_key, range_key if self.range_key_attr is not None else None),
            )

    def patched_update_item(self, table_name, key, *args, **kwargs):
        try:
            return update_item(self, table_name, key, *args, **kwargs)
        finally:
            table = self.tables.get(table_name)
            if table is None:
                try:
                    table = self.get_table(table_name)
                except Exception:
                    table = None
            if table is not None:
                _touched(table, lambda: _request_key(table, key))

    def patched_transact_write_items(self, transact_items, *args, **kwargs):
        try:
            return transact_write_items(self, transact_items, *args, **kwargs)
        finally:
            keys = None
            try:
                keys = _transaction_keys(self, transact_items)
            except Exception:
                pass
            if keys is None:
                # Unreadable request: drop the partitions of every table.
                for table in list(self.tables.values()):
                    table.__dict__[_PARTITIONS] = None
            else:
                for table, pk in keys:
                    _touched(table, lambda pk=pk: pk)

    def patched_delete_table(self, *args, **kwargs):
        table = delete_table(self, *args, **kwargs)
        if isinstance(table, Table):
            table.__dict__.pop(_PARTITIONS, None)
        return table

    Table.query = patched_query
    Table.put_item = patched_put_item
    Table.delete_item = patched_delete_item
    DynamoDBBackend.update_item = patched_update_item
    DynamoDBBackend.transact_write_items = patched_transact_write_items
    DynamoDBBackend.delete_table = patched_delete_table
