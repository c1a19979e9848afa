// A check of PromQL with Prometheus's own parser: the rule file named by the first argument (as
// `promtool check rules` reads it) and each line of stdin as an expression.
package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	p := parser.NewParser(parser.Options{})
	failed := false
	if len(os.Args) > 1 {
		logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
		if _, errs := rulefmt.ParseFile(os.Args[1], false, model.UTF8Validation, p, logger); len(errs) > 0 {
			for _, err := range errs {
				fmt.Fprintf(os.Stderr, "rules: %v\n", err)
			}
			failed = true
		}
	}
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if line == "" {
			continue
		}
		if _, err := p.ParseExpr(line); err != nil {
			fmt.Fprintf(os.Stderr, "expression %q: %v\n", line, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}
