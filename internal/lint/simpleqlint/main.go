// Command simpleqlint runs simpleqd's own checks (package internal/lint) as
// a go vet tool:
//
//	go build -o /tmp/simpleqlint ./internal/lint/simpleqlint
//	go vet -vettool=/tmp/simpleqlint ./...
//
// scripts/test does this for the daemon's module and the SDK's.
package main

import (
	"golang.org/x/tools/go/analysis/unitchecker"

	"github.com/simpleq/simpleqd/internal/lint"
)

func main() { unitchecker.Main(lint.Analyzers()...) }
