// Package awsclient loads the AWS SDK configuration shared by every function
// (pointed at an emulator when AWS_ENDPOINT_URL is set) and reads SSM
// parameters. It is kept apart from internal/awsrt so that the authorizer
// function does not link the whole runtime.
package awsclient

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go/middleware"
)

// Config loads the SDK configuration. With an endpoint (an emulator such as
// LocalStack or moto) every client is pointed at it, with static
// credentials and us-east-1 when the environment names none, as emulators
// accept. apiOptions are added to every client (call counting in tests).
// Clients retry throttling and transient errors as retry.go describes.
func Config(ctx context.Context, endpoint string, apiOptions ...func(*middleware.Stack) error) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if endpoint != "" {
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
			opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
		}
		if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
			opts = append(opts, awsconfig.WithRegion("us-east-1"))
		}
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return ac, err
	}
	if endpoint != "" {
		ac.BaseEndpoint = aws.String(endpoint)
	}
	ac.APIOptions = append(ac.APIOptions, apiOptions...)
	ac.Retryer = newRetryer
	return ac, nil
}

// Parameter reads one SSM parameter, decrypting a SecureString. The error
// names the parameter.
func Parameter(ctx context.Context, ac aws.Config, name string) (string, error) {
	out, err := ssm.NewFromConfig(ac).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return aws.ToString(out.Parameter.Value), nil
}
