package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates table with the layout the adapter needs: key pk (HASH,
// S) and sk (RANGE, S), on-demand billing (PAY_PER_REQUEST), a stream with
// NEW_AND_OLD_IMAGES, Time to Live on expiresAt, and one global secondary index per name in
// store.Indexes, keyed NAME_pk (HASH) and NAME_sk (RANGE) and projecting
// only the keys (KEYS_ONLY: Query reads each item itself). It then waits
// until the table and its indexes are ACTIVE,
// polling DescribeTable until ctx is done. A table that already exists is
// accepted (the call is idempotent) when it has that key schema, those
// indexes and a stream with both images.
//
// It returns ctx.Err() (wrapped) when ctx ends before the table is active, an
// error naming the difference when an existing table has another layout, and
// the SDK's error (wrapped) when a call fails.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	if client == nil || table == "" {
		return errors.New("dynamo: create table: no client or table name")
	}
	defs := []types.AttributeDefinition{
		{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
	}
	var gsis []types.GlobalSecondaryIndex
	for _, name := range indexNames {
		pk, sk := indexPKAttr(name), indexSKAttr(name)
		defs = append(defs,
			types.AttributeDefinition{AttributeName: aws.String(pk), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String(sk), AttributeType: types.ScalarAttributeTypeS},
		)
		gsis = append(gsis, types.GlobalSecondaryIndex{
			IndexName: aws.String(string(name)),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		})
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: defs,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		BillingMode:            types.BillingModePayPerRequest,
		GlobalSecondaryIndexes: gsis,
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamo: create table %s: %w", table, err)
	}
	if err := waitActive(ctx, client, table); err != nil {
		return err
	}
	return enableTTL(ctx, client, table)
}

// enableTTL turns on Time to Live on attrExpiresAt (store.Item.ExpiresAt)
// unless it is on already (UpdateTimeToLive refuses to enable it twice).
func enableTTL(ctx context.Context, client *dynamodb.Client, table string) error {
	d, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("dynamo: describe time to live of %s: %w", table, err)
	}
	if t := d.TimeToLiveDescription; t != nil && aws.ToString(t.AttributeName) == attrExpiresAt &&
		(t.TimeToLiveStatus == types.TimeToLiveStatusEnabled || t.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrExpiresAt), Enabled: aws.Bool(true)}})
	if err != nil {
		return fmt.Errorf("dynamo: enable time to live on %s: %w", table, err)
	}
	return nil
}

// waitActive polls DescribeTable until table and its indexes are ACTIVE, and
// checks its layout.
func waitActive(ctx context.Context, client *dynamodb.Client, table string) error {
	delay := 50 * time.Millisecond
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var notFound *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &notFound) {
			return fmt.Errorf("dynamo: create table %s: %w", table, err)
		}
		if err == nil {
			if err := checkLayout(out.Table); err != nil {
				return fmt.Errorf("dynamo: create table %s: %w", table, err)
			}
			if active(out.Table) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dynamo: create table %s: waiting for ACTIVE: %w", table, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

func active(t *types.TableDescription) bool {
	if t.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// checkLayout reports how an existing table differs from what CreateTable
// makes, in the parts the adapter relies on.
func checkLayout(t *types.TableDescription) error {
	keyOf := func(ks []types.KeySchemaElement) (hash, rng string) {
		for _, k := range ks {
			switch k.KeyType {
			case types.KeyTypeHash:
				hash = aws.ToString(k.AttributeName)
			case types.KeyTypeRange:
				rng = aws.ToString(k.AttributeName)
			}
		}
		return hash, rng
	}
	if h, r := keyOf(t.KeySchema); h != attrPK || r != attrSK {
		return fmt.Errorf("existing table has key %s/%s, want %s/%s", h, r, attrPK, attrSK)
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if n := aws.ToString(g.IndexName); n == "gsi3" || n == "gsi4" {
			return fmt.Errorf("existing table has index %s: it has the layout of an earlier version (no lookup entries) and there is no migration; use a new table", n)
		}
	}
	for _, name := range indexNames {
		found := false
		for _, g := range t.GlobalSecondaryIndexes {
			if aws.ToString(g.IndexName) != string(name) {
				continue
			}
			found = true
			if h, r := keyOf(g.KeySchema); h != indexPKAttr(name) || r != indexSKAttr(name) {
				return fmt.Errorf("existing index %s has key %s/%s", name, h, r)
			}
			if g.Projection == nil || g.Projection.ProjectionType != types.ProjectionTypeKeysOnly {
				return fmt.Errorf("existing index %s does not project KEYS_ONLY (a table of an earlier version, whose indexes projected ALL: there is no migration; use a new table)", name)
			}
		}
		if !found {
			return fmt.Errorf("existing table lacks index %s", name)
		}
	}
	ss := t.StreamSpecification
	if ss == nil || !aws.ToBool(ss.StreamEnabled) || ss.StreamViewType != types.StreamViewTypeNewAndOldImages {
		return errors.New("existing table has no stream with NEW_AND_OLD_IMAGES")
	}
	return nil
}

// StreamARN returns the ARN of table's current stream (DescribeTable's
// LatestStreamArn). It returns an error when the table has no enabled
// stream, and the SDK's error (wrapped) when the call fails.
func StreamARN(ctx context.Context, client *dynamodb.Client, table string) (string, error) {
	if client == nil {
		return "", errors.New("dynamo: stream ARN: no client")
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", fmt.Errorf("dynamo: stream ARN of %s: %w", table, err)
	}
	arn := aws.ToString(out.Table.LatestStreamArn)
	ss := out.Table.StreamSpecification
	if arn == "" || ss == nil || !aws.ToBool(ss.StreamEnabled) {
		return "", fmt.Errorf("dynamo: table %s has no enabled stream", table)
	}
	return arn, nil
}
