// Package streamfilter names the item types whose DynamoDB stream records
// the stream function acts on, for the stack's event source mapping filter
// (infra) and the runtime (internal/awsrt) alike. It has no dependencies,
// so the CDK app can import it without the runtime's.
package streamfilter

// RecordTypes are the item types whose stream records the stream function
// acts on: expectation records (the clock, the outbox, re-anchoring:
// watcher.TypeExpectation), executions (VERIFY:
// evaluation.TypeExecution), and for alerts VERIFYs (a failed one is an
// event) and notifications (each attempt is enqueued from its change:
// notify.HandledTypes). The stack filters the stream to them (lookup
// entries, guards, cards and the rest never invoke the function); a type
// the function comes to handle must be added here, which
// awsrt.TestStreamRecordTypes checks against the runtime.
var RecordTypes = []string{"expectation", "execution", "verification", "notification"}
