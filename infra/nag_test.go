package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nagReport is a cdk-nag JSON report (<pack>-<stack>-NagReport.json).
type nagReport struct {
	Lines []struct {
		RuleID          string `json:"ruleId"`
		ResourceID      string `json:"resourceId"`
		Compliance      string `json:"compliance"`
		ExceptionReason string `json:"exceptionReason"`
		RuleLevel       string `json:"ruleLevel"`
		RuleInfo        string `json:"ruleInfo"`
	} `json:"lines"`
}

// TestCDKNag fails on any finding of cdk-nag's AwsSolutions and Serverless
// packs that is not suppressed, and on a suppression without a reason
// (nag.go holds the suppressions and their reasons).
func TestCDKNag(t *testing.T) {
	all := map[string]*synthesized{}
	for stage, sy := range synth(t) {
		all[stage] = sy
	}
	for kind, sy := range synthJudges(t) {
		all["judge-"+kind] = sy
	}
	out := filepath.Join(testTmp(t), "cdk.out")
	for name, sy := range all {
		t.Run(name, func(t *testing.T) {
			for _, pack := range []string{"AwsSolutions", "Serverless"} {
				var rep nagReport
				// <pack>-<stage path>-<stack>-NagReport.json; the stacks are
				// in the app itself, so the stage path is empty.
				b, err := os.ReadFile(filepath.Join(out, pack+"--"+sy.cfg.Name+"-NagReport.json"))
				if err == nil {
					err = json.Unmarshal(b, &rep)
				}
				if err != nil {
					entries, _ := os.ReadDir(out)
					var names []string
					for _, e := range entries {
						names = append(names, e.Name())
					}
					t.Fatalf("%s report: %v (the output directory holds %v)", pack, err, names)
				}
				if len(rep.Lines) == 0 {
					t.Fatalf("%s report has no lines", pack)
				}
				for _, l := range rep.Lines {
					switch l.Compliance {
					case "Compliant", "N/A":
					case "Suppressed":
						if len(strings.TrimSpace(l.ExceptionReason)) < 20 {
							t.Errorf("%s %s on %s suppressed without a reason: %q", pack, l.RuleID, l.ResourceID, l.ExceptionReason)
						}
					default:
						t.Errorf("%s %s on %s: %s (%s)", pack, l.RuleID, l.ResourceID, l.Compliance, l.RuleInfo)
					}
				}
			}
		})
	}
}
