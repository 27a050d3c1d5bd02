package main

import (
	"fmt"
	"slices"
	"testing"
)

// TestProductionProtection: CloudFormation refuses to delete the prod
// stack; the HTTP stage, whose route settings throttle the public routes,
// is created after those routes (CloudFormation refuses settings for a
// route that does not exist yet).
func TestProductionProtection(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			if got := sy.stack.TerminationProtection() != nil && *sy.stack.TerminationProtection(); got != (stage == "prod") {
				t.Errorf("termination protection %v in %s", got, stage)
			}
			_, st := only(t, sy.json, "AWS::ApiGatewayV2::Stage", "StageName", "$default")
			deps := list(st["DependsOn"])
			for id, r := range resources(sy.json, "AWS::ApiGatewayV2::Route") {
				key := props(r)["RouteKey"]
				if _, public := publicRouteSettings(sy.cfg)[fmt.Sprint(key)]; public && !slices.Contains(deps, any(id)) {
					t.Errorf("stage does not depend on the public route %s (%s): %v", key, id, deps)
				}
			}
		})
	}
}
