// Package lambdatest runs the four Lambda functions (functions/api,
// functions/authorizer, functions/clock, functions/stream) as Lambda runs them: each is built as a
// linux `bootstrap`, started under the AWS Lambda Runtime Interface Emulator
// (aws-lambda-rie) against the moto emulator, and invoked with the sample
// events of the repository's events/ directory, whose expected results are
// in each folder's expected.json. The package has only tests; see
// lambda_test.go (the end-to-end run; rie_test.go runs a bootstrap under
// aws-lambda-rie), events_test.go (the static checks of the sample events)
// and generate_test.go (how the events are made, with generate_api_test.go
// and generate_stream_test.go).
package lambdatest
