"""Tests of the emulator's modules, one file per behaviour, each against what
DynamoDB documents for it. They talk to a running emulator whose endpoint is in
CLOCKWORK_EMULATOR_ENDPOINT (the Go test TestEmulatorModules in
internal/store/dynamo/dynamotest starts one and runs them with the emulator's
virtualenv):

    CLOCKWORK_EMULATOR_ENDPOINT=http://127.0.0.1:PORT \\
        $(localstack/dynamodb-emulator.sh path)/bin/python -m unittest discover \\
        -s localstack/emulator/tests -t localstack"""
