// Package awsjudge builds the AWS runtime's model judge from its JUDGE_*
// settings. It is a package of its own so that only the functions that grade
// (stream and clock, and the local AWS mode) link the model clients.
package awsjudge

import (
	"context"

	"github.com/agentclock/clockwork/internal/anticipate"
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
	return modelJudge{j}, nil
}

// modelJudge lets an evaluation grade with another model of the judge
// (awsrt finds WithModel).
type modelJudge struct{ j judge.Judge }

// Judge grades with the configured model.
func (m modelJudge) Judge(ctx context.Context, req anticipate.JudgeRequest) (*anticipate.JudgeResponse, error) {
	return m.j.Judge(ctx, req)
}

// WithModel is judge.WithModel.
func (m modelJudge) WithModel(model string) (evaluation.Judge, bool) {
	j, ok := judge.WithModel(m.j, model)
	if !ok {
		return nil, false
	}
	return j, true
}
