"""The test emulator's parts (see dynamodb_emulator.py): one module per
behaviour it adds to moto."""
