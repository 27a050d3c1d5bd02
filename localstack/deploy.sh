#!/usr/bin/env bash
# Bootstrap LocalStack for the CDK and deploy the clockwork stack to it with
# cdklocal, then print the API URL (and how to fire the schedules, which
# LocalStack stores but never fires).
#
# Usage:
#   localstack/deploy.sh [dev|staging|prod]        (default dev)
#
# Needs: a running LocalStack (localstack/docker-compose.yml), Node.js 22+,
# npm, Go and curl. The pinned CDK CLI and cdklocal are installed into
# infra/_tools/node_modules on first use (npm ci; nothing global).
#
# Environment:
#   LOCALSTACK_ENDPOINT   LocalStack's edge endpoint (default http://127.0.0.1:4566)
#   AWS_ENDPOINT_URL_S3   S3 endpoint for asset upload; must contain ".s3."
#                         (default http://s3.localhost.localstack.cloud:PORT,
#                         a public name for 127.0.0.1)
#   AWS_REGION            region (default us-east-1)
#   ARCH                  Lambda architecture, arm64 or x86_64 (default: the
#                         host's, since LocalStack runs the functions in
#                         containers on this machine; the real stack is arm64)
#   ALLOW_PRIVATE_AGENTS  true: lapse tasks may reach agents on private
#                         addresses (dev only; e.g. an agent on the host)
#   ROTATE_TOKEN          1: replace the tokens parameter with a new token
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
me="localstack/deploy.sh"

die() { echo "$me: $*" >&2; exit 1; }

stage="${1:-dev}"
case "$stage" in
  dev|staging|prod) ;;
  -h|--help) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown stage \"$stage\": use dev, staging or prod (e.g. $me dev)" ;;
esac

# --- prerequisites -----------------------------------------------------------
command -v node >/dev/null 2>&1 ||
  die "node not found: the CDK CLI and the CDK construct library run on Node.js; install Node.js 22 or newer and run $me again"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 22 ] ||
  die "Node.js $(node --version) is too old: install Node.js 22 or newer (or put the one infra/_tools/node22.sh path prints first on PATH) and run $me again"
command -v npm >/dev/null 2>&1 || die "npm not found: it comes with Node.js; install it and run $me again"
command -v go >/dev/null 2>&1 || die "go not found: synth builds the Lambda functions from this repository; install Go (see go.mod) and run $me again"
command -v curl >/dev/null 2>&1 || die "curl not found: install curl and run $me again"

endpoint="${LOCALSTACK_ENDPOINT:-http://127.0.0.1:4566}"
endpoint="${endpoint%/}"
port="${endpoint##*:}"
case "$port" in ''|*[!0-9]*) port=4566 ;; esac

curl -fsS --max-time 5 "$endpoint/_localstack/health" >/dev/null 2>&1 ||
  die "LocalStack does not answer at $endpoint: start it with
    export LOCALSTACK_AUTH_TOKEN=...   # see localstack/README.md
    docker compose -f localstack/docker-compose.yml up -d --wait
and run $me again (or set LOCALSTACK_ENDPOINT)"

# --- the CDK CLI, pinned ------------------------------------------------------
tools="$root/infra/_tools"
cdklocal="$tools/node_modules/.bin/cdklocal"
if [ ! -x "$cdklocal" ] || [ ! -x "$tools/node_modules/.bin/cdk" ]; then
  echo "$me: installing the pinned CDK CLI (aws-cdk) and cdklocal into infra/_tools ..." >&2
  npm ci --prefix "$tools" --no-audit --no-fund >&2 ||
    die "npm ci --prefix infra/_tools failed: the CDK CLI is missing. Check that the npm registry is reachable and run $me again"
fi

# --- environment for cdklocal -----------------------------------------------
case "${ARCH:-}" in
  "") case "$(uname -m)" in arm64|aarch64) arch=arm64 ;; *) arch=x86_64 ;; esac ;;
  arm64|x86_64) arch="$ARCH" ;;
  *) die "ARCH=$ARCH: use arm64 or x86_64" ;;
esac
region="${AWS_REGION:-us-east-1}"
account=000000000000
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_REGION="$region" AWS_DEFAULT_REGION="$region"
export AWS_ENDPOINT_URL="$endpoint"
export AWS_ENDPOINT_URL_S3="${AWS_ENDPOINT_URL_S3:-http://s3.localhost.localstack.cloud:$port}"
export AWS_ENVAR_ALLOWLIST="AWS_REGION,AWS_DEFAULT_REGION,AWS_ACCESS_KEY_ID,AWS_SECRET_ACCESS_KEY"
# Nothing but LocalStack: no instance metadata, no CLI telemetry or notices.
export AWS_EC2_METADATA_DISABLED=true CDK_DISABLE_CLI_TELEMETRY=true

context=(-c "stage=$stage" -c "arch=$arch")
# Staging and prod need someone to hear their alarms (synth refuses them
# without): on LocalStack nobody is mailed, so a placeholder does.
[ "$stage" = dev ] || context+=(-c "alarmEmail=${ALARM_EMAIL:-alarms@localstack.invalid}")
if [ "${ALLOW_PRIVATE_AGENTS:-false}" = true ]; then
  [ "$stage" = dev ] || die "ALLOW_PRIVATE_AGENTS=true is for the dev stage only"
  context+=(-c allowPrivateAgents=true)
fi

# --- the tokens parameter (SSM SecureString, hashed tokens) -------------------
# The API function reads it at start; without it every request would fail.
# A new token is generated and printed once; only its SHA-256 is stored.
param="/clockwork/$stage/tokens"
ssm() { # ssm ACTION JSON -> prints the body, then the HTTP status on a last line
  curl -sS --max-time 10 -X POST "$endpoint/" \
    -H 'Content-Type: application/x-amz-json-1.1' \
    -H "X-Amz-Target: AmazonSSM.$1" \
    -H "Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/$region/ssm/aws4_request, SignedHeaders=content-type;host;x-amz-target, Signature=0" \
    --data "$2" -w '\n%{http_code}'
}
status="$(ssm GetParameter "{\"Name\":\"$param\"}" | tail -n 1)" || die "could not reach SSM at $endpoint"
token=""
if [ "$status" != 200 ] || [ "${ROTATE_TOKEN:-0}" = 1 ]; then
  token="$(node -p 'require("crypto").randomBytes(32).toString("hex")')"
  body="$(TOKEN="$token" PARAM="$param" node -e '
    const crypto = require("crypto");
    const tokens = {tokens: [{
      tokenSha256: crypto.createHash("sha256").update(process.env.TOKEN).digest("hex"),
      principal: "localstack", agents: ["*"],
      scopes: ["agents:write", "expectations:write", "facts:write", "anticipations:write", "events:write", "grades:write", "read"],
    }]};
    process.stdout.write(JSON.stringify({Name: process.env.PARAM, Type: "SecureString", Value: JSON.stringify(tokens), Overwrite: true}));
  ')"
  out="$(ssm PutParameter "$body")"
  [ "$(tail -n 1 <<<"$out")" = 200 ] || die "could not create the SSM parameter $param in LocalStack: $(head -n 1 <<<"$out")"
fi

# --- bootstrap and deploy -----------------------------------------------------
cd "$root"
mkdir -p cdk.out
outputs="$root/cdk.out/localstack-outputs-$stage.json"
echo "$me: bootstrapping aws://$account/$region on $endpoint ..." >&2
"$cdklocal" bootstrap "aws://$account/$region" --no-notices "${context[@]}" >&2 ||
  die "cdklocal bootstrap failed (see above): check that LocalStack is healthy at $endpoint and that AWS_ENDPOINT_URL_S3=$AWS_ENDPOINT_URL_S3 resolves to it"
echo "$me: deploying clockwork-$stage (Lambda architecture $arch) ..." >&2
"$cdklocal" deploy "clockwork-$stage" --require-approval never --no-notices "${context[@]}" --outputs-file "$outputs" >&2 ||
  die "cdklocal deploy failed (see above). The HTTP API (API Gateway v2) needs a LocalStack plan that includes it; a synth error names its fix"

# --- what to do next ----------------------------------------------------------
out() { node -e 'const o = require(process.argv[1])[process.argv[2]] || {}; process.stdout.write(o[process.argv[3]] || "")' "$outputs" "clockwork-$stage" "$1"; }
api_id="$(out ApiId)"
[ -n "$api_id" ] || die "deployed, but $outputs has no ApiId output"
api_url="http://$api_id.execute-api.localhost.localstack.cloud:$port/"
host="$api_id.execute-api.localhost.localstack.cloud"

if curl -fsS --max-time 30 --resolve "$host:$port:127.0.0.1" "${api_url}healthz" >/dev/null 2>&1; then
  health="answers GET /healthz"
else
  health="did not answer GET /healthz yet (the first call starts the function container; try again)"
fi

cat <<EOF

clockwork-$stage is deployed to LocalStack ($endpoint); outputs in ${outputs#"$root"/}.
  table           $(out TableName)
  schedule group  $(out ScheduleGroupName)
  tokens          $param
EOF
if [ -n "$token" ]; then
  echo "  bearer token    $token   (printed once; only its SHA-256 is stored; ROTATE_TOKEN=1 makes a new one)"
fi
cat <<EOF

LocalStack stores EventBridge Scheduler schedules but never fires them. To fire
them, run the local server in AWS mode beside it (it also polls the stream):

  go run ./functions/local -addr 127.0.0.1:8081 -aws-endpoint $endpoint \\
    -table $(out TableName) -schedule-group $(out ScheduleGroupName) \\
    -clock-function-arn $(out ClockFunctionArn) -scheduler-role-arn $(out SchedulerRoleArn)

The API $health.
API URL: $api_url
EOF
