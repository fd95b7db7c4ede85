package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
)

// sdkOptions lists the options of the Go provider SDK whose source is in dir: its
// exported functions that return one of its exported option types (a func type whose
// name ends in Option: Option for a provider, ToolOption for a tool).
func sdkOptions(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	types := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, f)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if _, fn := ts.Type.(*ast.FuncType); fn && ts.Name.IsExported() && strings.HasSuffix(ts.Name.Name, "Option") {
					types[ts.Name.Name] = true
				}
			}
		}
	}
	opts := map[string]bool{}
	for _, f := range parsed {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Type.Results == nil || len(fd.Type.Results.List) != 1 {
				continue
			}
			if id, ok := fd.Type.Results.List[0].Type.(*ast.Ident); ok && types[id.Name] {
				opts[fd.Name.Name] = true
			}
		}
	}
	if len(opts) == 0 {
		return nil, fmt.Errorf("no option functions in %s", dir)
	}
	return opts, nil
}

// sdkOptionList is the README's list of the Go SDK's options: from "Options:
// `provider.…`" to the end of its sentence.
var sdkOptionList = regexp.MustCompile("(?s)Options: `provider\\..*?\\.(?:\\s|$)")

// checkSDKOptions holds the README's list of the Go SDK's options to the SDK: it names
// every option function (`WithCondition(cel)` and `provider.Exclusive()` name
// WithCondition and Exclusive), and only those.
func checkSDKOptions(text string, opts map[string]bool) []finding {
	loc := sdkOptionList.FindStringIndex(text)
	if loc == nil {
		return []finding{{0, "no list of the Go SDK's options (Options: `provider.…`) found"}}
	}
	line := 1 + strings.Count(text[:loc[0]], "\n")
	var out []finding
	named := map[string]bool{}
	for _, m := range codeSpan.FindAllStringSubmatch(text[loc[0]:loc[1]], -1) {
		name := strings.TrimPrefix(m[1], "provider.")
		name, _, _ = strings.Cut(name, "(")
		named[name] = true
		if !opts[name] {
			out = append(out, finding{line, fmt.Sprintf("the Go SDK's options list names %q, which is no option of pkg/provider", m[1])})
		}
	}
	var missing []string
	for _, name := range sortedKeys(opts) {
		if !named[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		out = append(out, finding{line, fmt.Sprintf("the Go SDK's options list lacks %s", strings.Join(missing, ", "))})
	}
	return out
}
