package dynamotest_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

func TestStartAndNewTable(t *testing.T) {
	ep := dynamotest.Start(t)
	if again, _, err := dynamotest.StartMain(); err != nil || again != ep {
		t.Fatalf("StartMain = %q, %v; want the same endpoint %q", again, err, ep)
	}
	db, _ := dynamotest.NewClients(ep)
	name := dynamotest.NewTable(t, db, "dt-")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatalf("DescribeTable: %v", err)
	}
	if out.Table.LatestStreamArn == nil || len(out.Table.GlobalSecondaryIndexes) != len(store.Indexes) {
		t.Fatalf("table %s: stream %v, %d indexes", name, out.Table.LatestStreamArn, len(out.Table.GlobalSecondaryIndexes))
	}
}
