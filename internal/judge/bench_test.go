package judge_test

import (
	"context"
	"testing"

	"github.com/agentclock/clockwork/internal/judge"
	"github.com/agentclock/clockwork/internal/judge/judgetest"
)

// BenchmarkJudgeRoundTrip measures one criterion's grading through each
// judge against its loopback fake: building the prompt, the request (SigV4
// signing for Bedrock), the HTTP round trip, the fake's shape checks and
// answer, and the strict parsing and digest of the grade.
//
//	go test -run '^$' -bench JudgeRoundTrip -benchtime 2000x ./internal/judge
func BenchmarkJudgeRoundTrip(b *testing.B) {
	req := request()
	run := func(b *testing.B, j judge.Judge) {
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := j.Judge(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("openai", func(b *testing.B) {
		f := judgetest.NewOpenAI(b, model, "sk-bench")
		j, err := judge.New(context.Background(), judge.Config{Kind: judge.KindOpenAI, URL: f.BaseURL(), Model: model, APIKey: "sk-bench", AllowPrivate: true})
		if err != nil {
			b.Fatal(err)
		}
		run(b, j)
	})
	b.Run("bedrock", func(b *testing.B) {
		f := judgetest.NewBedrock(b, modelID)
		run(b, bedrock(b, f, 0))
	})
	b.Run("http", func(b *testing.B) {
		var got []byte
		srv := newJudgeServer(b, &got)
		j, err := judge.New(context.Background(), judge.Config{URL: srv, AllowPrivate: true})
		if err != nil {
			b.Fatal(err)
		}
		run(b, j)
	})
}
