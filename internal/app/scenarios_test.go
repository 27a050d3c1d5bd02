package app

import "testing"

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
	{"AssertionsReadTheWatcher", scenarioAssertionsReadTheWatcher},
	{"DigestChainRecomputedAndTamperDetected", scenarioDigestChainRecomputedAndTamperDetected},
	{"VerifyFollowsTheSeedAsReturned", scenarioVerifyFollowsTheSeedAsReturned},
	{"EvaluationBadInput", scenarioEvaluationBadInput},
	{"RFC032Emitter", scenarioRFC032Emitter},
	{"VerifySurvivesCrashBeforeFeed", scenarioVerifySurvivesCrashBeforeFeed},
	{"CardsAndAuth", scenarioCardsAndAuth},
	{"RaiseIdempotentConflictAndAllOrNothing", scenarioRaiseIdempotentConflictAndAllOrNothing},
	{"OverdueLapseTask", scenarioOverdueLapseTask},
	{"FactsExactMatchSourceLateAndIdempotent", scenarioFactsExactMatchSourceLateAndIdempotent},
	{"SkippedLapse", scenarioSkippedLapse},
	{"StalledLapse", scenarioStalledLapse},
	{"AnchorsReanchorChains", scenarioAnchorsReanchorChains},
	{"SupersedeAndLineage", scenarioSupersedeAndLineage},
	{"WithdrawAndTaskCancel", scenarioWithdrawAndTaskCancel},
	{"A2AEndpoint", scenarioA2AEndpoint},
	{"DeliveryRetriesDeadLetterAndReplay", scenarioDeliveryRetriesDeadLetterAndReplay},
	{"AgentDownSlowThenBack", scenarioAgentDownSlowThenBack},
	{"KeepsTimeAgentsAreNotSent", scenarioKeepsTimeAgentsAreNotSent},
	{"OutboundGuardRefusesLoopbackAgents", scenarioOutboundGuardRefusesLoopbackAgents},
	{"RestartFiresMissedInstantsAndDeliversOnce", scenarioRestartFiresMissedInstantsAndDeliversOnce},
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
// the local AWS mode's stream and schedule pollers.
func TestAWSMode(t *testing.T) {
	startEmulator(t)
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			backendKind = "aws"
			defer func() { backendKind = "embedded" }()
			s.run(t)
		})
	}
}
