// Package lint holds simpleqd's own static checks, the rules a reviewer
// would otherwise enforce by eye: which packages may import which (storage
// knows nothing of delivery or HTTP, the SDK nothing of the daemon), and no
// sleeping in tests. The rules live in rules.yaml beside this file, embedded
// so that a change of rules changes the checker (and go vet's cache of its
// results). scripts/test runs the checks through `go vet -vettool`, built
// from ./internal/lint/simpleqlint; a full golangci-lint build costs minutes
// on a fresh machine, these two analyzers a second.
package lint

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/tools/go/analysis"
)

//go:embed rules.yaml
var rulesYAML []byte

// Rules is the contents of rules.yaml.
type Rules struct {
	Imports   []ImportRule `yaml:"imports"`
	TestSleep []Forbidden  `yaml:"testsleep"`
}

// ImportRule forbids the packages in Packages (and below) to import those in
// Deny (and below); Name is the reason, shown with every finding.
type ImportRule struct {
	Name     string   `yaml:"name"`
	Packages []string `yaml:"packages"`
	Deny     []string `yaml:"deny"`
}

// Forbidden is a function test files may not use: Func is "pkgpath.Name".
type Forbidden struct {
	Func string `yaml:"func"`
	Why  string `yaml:"why"`
}

// Load parses rules (rules.yaml's syntax); unknown fields are an error, so a
// misspelt rule cannot silently check nothing.
func Load(data []byte) (*Rules, error) {
	var r Rules
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("lint rules: %w", err)
	}
	for _, ir := range r.Imports {
		if ir.Name == "" || len(ir.Packages) == 0 || len(ir.Deny) == 0 {
			return nil, fmt.Errorf("lint rules: import rule %q needs a name, packages and deny", ir.Name)
		}
	}
	for _, f := range r.TestSleep {
		if !strings.Contains(f.Func, ".") || f.Why == "" {
			return nil, fmt.Errorf("lint rules: forbidden function %q needs pkg.Name and a why", f.Func)
		}
	}
	return &r, nil
}

// mustLoad loads the embedded rules; they are part of the binary, so a bad
// file is a build-time mistake that the package's own test catches.
func mustLoad() *Rules {
	r, err := Load(rulesYAML)
	if err != nil {
		panic(err)
	}
	return r
}

// under reports whether path is pkg or a package below it.
func under(path, pkg string) bool {
	return path == pkg || strings.HasPrefix(path, pkg+"/")
}

// NewImports returns the analyzer that enforces rules' import rules.
func NewImports(rules *Rules) *analysis.Analyzer {
	return &analysis.Analyzer{
		Name: "importrules",
		Doc:  "checks simpleqd's import rules (internal/lint/rules.yaml)",
		Run: func(pass *analysis.Pass) (any, error) {
			// An external test package (store_test) follows its package's rules.
			self := strings.TrimSuffix(pass.Pkg.Path(), "_test")
			for _, rule := range rules.Imports {
				if !anyUnder(self, rule.Packages) {
					continue
				}
				for _, f := range pass.Files {
					for _, spec := range f.Imports {
						path, err := strconv.Unquote(spec.Path.Value)
						if err != nil || !anyUnder(path, rule.Deny) || suppressed(pass, f, spec.Pos(), "importrules") {
							continue
						}
						pass.Reportf(spec.Pos(), "%s may not import %s: %s", self, path, rule.Name)
					}
				}
			}
			return nil, nil
		},
	}
}

func anyUnder(path string, pkgs []string) bool {
	for _, p := range pkgs {
		if under(path, p) {
			return true
		}
	}
	return false
}

// NewTestSleep returns the analyzer that reports every use (a call or a
// function value) of a forbidden function in a test file.
func NewTestSleep(rules *Rules) *analysis.Analyzer {
	return &analysis.Analyzer{
		Name: "testsleep",
		Doc:  "reports functions test files may not use, time.Sleep first (internal/lint/rules.yaml)",
		Run: func(pass *analysis.Pass) (any, error) {
			for _, f := range pass.Files {
				if !strings.HasSuffix(pass.Fset.File(f.Pos()).Name(), "_test.go") {
					continue
				}
				ast.Inspect(f, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					fn, ok := pass.TypesInfo.Uses[sel.Sel].(*types.Func)
					if !ok || fn.Pkg() == nil {
						return true
					}
					name := fn.Pkg().Path() + "." + fn.Name()
					for _, fb := range rules.TestSleep {
						if fb.Func == name && !suppressed(pass, f, sel.Pos(), "testsleep") {
							pass.Reportf(sel.Pos(), "%s in a test: %s (or say why on the line: //nolint:testsleep // why)", name, fb.Why)
						}
					}
					return true
				})
			}
			return nil, nil
		},
	}
}

// nolint matches a suppression comment: the analyzers it names, then the
// reason after a second "//", which is required.
var nolint = regexp.MustCompile(`^//nolint:([a-z0-9,]+)(.*)$`)

// suppressed reports whether the line of pos carries a //nolint comment
// naming analyzer. One without a reason ("//nolint:x // why") is reported
// and does not count, so every exception explains itself.
func suppressed(pass *analysis.Pass, f *ast.File, pos token.Pos, analyzer string) bool {
	line := pass.Fset.Position(pos).Line
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if pass.Fset.Position(c.Slash).Line != line {
				continue
			}
			m := nolint.FindStringSubmatch(c.Text)
			if m == nil || !slices.Contains(strings.Split(m[1], ","), analyzer) {
				continue
			}
			why, ok := strings.CutPrefix(strings.TrimSpace(m[2]), "//")
			if !ok || strings.TrimSpace(why) == "" {
				pass.Reportf(c.Slash, "//nolint:%s needs a reason: //nolint:%s // why", analyzer, analyzer)
				return false
			}
			return true
		}
	}
	return false
}

// Analyzers returns the checks with the embedded rules.
func Analyzers() []*analysis.Analyzer {
	r := mustLoad()
	return []*analysis.Analyzer{NewImports(r), NewTestSleep(r)}
}
