// Package awsjudge builds the AWS runtime's model judge from its JUDGE_*
// settings. It is a package of its own so that only the functions that grade
// (stream and clock, and the local AWS mode) link the model clients.
package awsjudge

import (
	"context"

	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/judge"
)

// New is the awsrt.JudgeFactory of the functions: the judge that s names
// (judge.New), or nil when s names none. Its errors are judge.New's.
func New(ctx context.Context, s awsrt.JudgeSettings) (evaluation.Judge, error) {
	ac := s.AWS
	j, err := judge.New(ctx, judge.Config{Kind: s.Kind, URL: s.URL, Model: s.Model, Token: s.Token,
		APIKey: s.APIKey, AllowPrivate: s.AllowPrivate, AWS: &ac, Metrics: s.Metrics})
	if err != nil || j == nil {
		return nil, err
	}
	return j, nil
}
