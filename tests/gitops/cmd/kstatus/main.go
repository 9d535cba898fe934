// Command kstatus reads one Kubernetes object as JSON on stdin and prints the result kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus/status, what Flux, kustomize and kubectl waiters read)
// computes for it, as one JSON object: {"status": "Current", "message": "..."}.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type result struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kstatus:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	object := &unstructured.Unstructured{}
	if err := object.UnmarshalJSON(data); err != nil {
		return fmt.Errorf("reading the object: %w", err)
	}
	computed, err := status.Compute(object)
	if err != nil {
		return fmt.Errorf("computing the status: %w", err)
	}
	return json.NewEncoder(out).Encode(result{
		Status:  computed.Status.String(),
		Message: computed.Message,
	})
}
