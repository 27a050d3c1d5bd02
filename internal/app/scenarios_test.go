package app

import (
	"testing"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// scenarios are the end-to-end scenarios of both protocols, run against
// every backend: the embedded default and the AWS mode on emulators.
var scenarios = []struct {
	name string
	run  func(*testing.T)
}{
	{"SeedEndToEnd", scenarioSeedEndToEnd},
	{"SeedVariants", scenarioSeedVariants},
	{"HumanGradeLifecycle", scenarioHumanGradeLifecycle},
	{"HeuristicJudge", scenarioHeuristicJudge},
	{"ModelJudges", scenarioModelJudges},
	{"JudgeOutage", scenarioJudgeOutage},
	{"Regrading", scenarioRegrading},
	{"ScoresOut", scenarioScoresOut},
	{"PassRateAlert", scenarioPassRateAlert},
	{"ReviewQueues", scenarioReviewQueues},
	{"OnlineEvaluators", scenarioOnlineEvaluators},
	{"AssertionsReadTheWatcher", scenarioAssertionsReadTheWatcher},
	{"DigestChainRecomputedAndTamperDetected", scenarioDigestChainRecomputedAndTamperDetected},
	{"VerifyFollowsTheSeedAsReturned", scenarioVerifyFollowsTheSeedAsReturned},
	{"EvidenceBundleVerifiesOffline", scenarioEvidenceBundleVerifiesOffline},
	{"EvaluationBadInput", scenarioEvaluationBadInput},
	{"RFC032Emitter", scenarioRFC032Emitter},
	{"VerifySurvivesCrashBeforeFeed", scenarioVerifySurvivesCrashBeforeFeed},
	{"LongPlanVerified", scenarioLongPlanVerified},
	{"CardsAndAuth", scenarioCardsAndAuth},
	{"TenantsPlansApart", scenarioTenantsPlansApart},
	{"TenantsEdgeRefusals", scenarioTenantsEdgeRefusals},
	{"RaiseIdempotentConflictAndAllOrNothing", scenarioRaiseIdempotentConflictAndAllOrNothing},
	{"OverdueLapseTask", scenarioOverdueLapseTask},
	{"Heartbeats", scenarioHeartbeats},
	{"FactsBeforeTheRaiseAndRefuting", scenarioFactsBeforeTheRaiseAndRefuting},
	{"WatchedTasks", scenarioWatchedTasks},
	{"WatchedTasksTenancy", scenarioWatchedTasksTenancy},
	{"WatchedTasksPushed", scenarioWatchedTasksPushed},
	{"FactsExactMatchSourceLateAndIdempotent", scenarioFactsExactMatchSourceLateAndIdempotent},
	{"SkippedLapse", scenarioSkippedLapse},
	{"StalledLapse", scenarioStalledLapse},
	{"AnchorsReanchorChains", scenarioAnchorsReanchorChains},
	{"AnchorsMetWhileTheClockFails", scenarioAnchorsMetWhileTheClockFails},
	{"SupersedeAndLineage", scenarioSupersedeAndLineage},
	{"WithdrawAndTaskCancel", scenarioWithdrawAndTaskCancel},
	{"A2AEndpoint", scenarioA2AEndpoint},
	{"DeliveryRetriesDeadLetterAndReplay", scenarioDeliveryRetriesDeadLetterAndReplay},
	{"AgentDownSlowThenBack", scenarioAgentDownSlowThenBack},
	{"AgentDownThenBack", scenarioAgentDownThenBack},
	{"KeepsTimeAgentsAreNotSent", scenarioKeepsTimeAgentsAreNotSent},
	{"OutboundGuardRefusesLoopbackAgents", scenarioOutboundGuardRefusesLoopbackAgents},
	{"RestartFiresMissedInstantsAndDeliversOnce", scenarioRestartFiresMissedInstantsAndDeliversOnce},
	{"RaceFactRightAfterRaise", scenarioRaceFactRightAfterRaise},
	{"RaceAnchorSatisfiedWhileDependentRaised", scenarioRaceAnchorSatisfiedWhileDependentRaised},
	{"RaceTaskCanceledRightAfterRaise", scenarioRaceTaskCanceledRightAfterRaise},
	{"RaceFirstEventRightAfterAnticipate", scenarioRaceFirstEventRightAfterAnticipate},
	{"RaceWithdrawVersusLapse", scenarioRaceWithdrawVersusLapse},
	{"AgentRequiresBearer", scenarioAgentRequiresBearer},
	{"AgentRequiresOAuthAndMTLS", scenarioAgentRequiresOAuthAndMTLS},
	{"RepointedCardDropsCredentials", scenarioRepointedCardDropsCredentials},
	{"InstantsSurviveAnUnkindClock", scenarioInstantsSurviveAnUnkindClock},
	{"GoClient", scenarioGoClient},
	{"MCPTools", scenarioMCPTools},
	{"MCPOfficialClients", scenarioMCPOfficialClients},
	{"MCPHostConfigs", scenarioMCPHostConfigs},
	{"ConsoleListings", scenarioConsoleListings},
	{"MetricsMove", scenarioMetricsMove},
	{"Alerts", scenarioAlerts},
	{"AlertsTenancy", scenarioAlertsTenancy},
	{"AlertsOnCall", scenarioAlertsOnCall},
	{"AlertsSilenced", scenarioAlertsSilenced},
	{"OTLPTraces", scenarioOTLPTraces},
	{"AgentErasure", scenarioAgentErasure},
	{"ErasureTenancy", scenarioErasureTenancy},
	{"Retention", scenarioRetention},
	{"IDReusedAfterExpiry", scenarioIDReusedAfterExpiry},
}

// TestEmbedded runs every scenario against the embedded default.
func TestEmbedded(t *testing.T) {
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			backendKind = "embedded"
			s.run(t)
		})
	}
}

// TestAWSMode runs every scenario against the AWS runtime (the Lambda
// handlers, DynamoDB and EventBridge Scheduler) on the moto emulator, with
// the local AWS mode's stream and schedule pollers, and with the faults
// AWS has and moto does not: GSIs 2 s behind, throttling, transactions
// cancelled for conflicts (dynamotest.DefaultFaults), and stream records
// out of order across items, duplicated and cut off mid-batch
// (awsStreamFaults).
func TestAWSMode(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the scenarios run on the embedded default; the full run repeats them on the AWS runtime over moto")
	}
	startEmulator(t)
	recordAWSOperations(t)
	before := dynamotest.SetFaults(t, emulatorEndpoint, dynamotest.DefaultFaults)
	awsStreamFaults = &awsrt.StreamFaults{Reorder: true, Duplicate: 0.1, Cut: 0.1}
	t.Cleanup(func() {
		after := dynamotest.SetFaults(t, emulatorEndpoint, dynamotest.Faults{})
		awsStreamFaults = nil
		t.Logf("emulator faults injected: %d throttled, %d transaction conflicts, %d items hidden from lagging GSI queries",
			after.Throttled-before.Throttled, after.Conflicts-before.Conflicts, after.HiddenFromIndex-before.HiddenFromIndex)
	})
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			backendKind = "aws"
			defer func() { backendKind = "embedded" }()
			s.run(t)
		})
	}
}
