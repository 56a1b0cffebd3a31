package docs_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// snippet is one ```go block of a Markdown file, with the context a
// comment right above it gives (<!-- go: ... -->).
type snippet struct {
	line    int    // of the opening fence
	context string // the comment's text: a func signature, or declarations
	code    string
}

var goContext = regexp.MustCompile(`^<!-- go: (.*) -->$`)

// snippets returns the ```go blocks of the Markdown file md.
func snippets(t *testing.T, md string) []snippet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), md))
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	var out []snippet
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```go" {
			continue
		}
		s := snippet{line: i + 1}
		if i > 0 {
			if m := goContext.FindStringSubmatch(lines[i-1]); m != nil {
				s.context = m[1]
			}
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		s.code = strings.Join(body, "\n")
		out = append(out, s)
	}
	return out
}

// snippetImports are the packages a snippet may name, by the name it uses.
var snippetImports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "http": "net/http", "os": "os",
	"slog": "log/slog", "testing": "testing", "time": "time",
	"mask": module + "mask", "oomdump": module + "oomdump", "pool": module + "pool",
	"pprofexport": module + "pprofexport", "report": module + "report", "tensor": module + "tensor",
	"cuda": module + "tensor/cuda", "foreign": module + "tensor/foreign", "timeline": module + "timeline", "track": module + "track",
	"oteltrack": module + "oteltrack", "tracktest": module + "track/tracktest",
	"watch":      module + "track/watch",
	"httptrack":  module + "track/httptrack",
	"io":         "io",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"promhttp":   "github.com/prometheus/client_golang/prometheus/promhttp",
	"otelprom":   "go.opentelemetry.io/otel/exporters/prometheus",
	"sdkmetric":  "go.opentelemetry.io/otel/sdk/metric",
}

var qualified = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.[A-Z]`)

// source makes a file of s: its code as it stands when it declares
// functions or types, inside a function of the comment's signature
// otherwise, with the imports it names.
func (s snippet) source(n int) string {
	var body strings.Builder
	code := s.code
	switch {
	case strings.HasPrefix(code, "func ") || strings.HasPrefix(code, "type "):
		if s.context != "" {
			body.WriteString(s.context + "\n")
		}
		body.WriteString(code + "\n")
	default:
		sig := "func()"
		if s.context != "" {
			sig = s.context
		}
		fmt.Fprintf(&body, "func snippet%d%s {\n%s\n", n, strings.TrimPrefix(sig, "func"), code)
		if strings.Contains(sig, ") (") { // named results: the code may fall off the end
			body.WriteString("return\n")
		}
		body.WriteString("}\n")
	}
	var imports []string
	for _, m := range qualified.FindAllStringSubmatch(body.String(), -1) {
		if path, ok := snippetImports[m[1]]; ok && !slices.Contains(imports, path) {
			imports = append(imports, path)
		}
	}
	var src strings.Builder
	src.WriteString("package snippet\n\nimport (\n")
	for _, path := range imports {
		name := path[strings.LastIndex(path, "/")+1:]
		switch path {
		case "go.opentelemetry.io/otel/exporters/prometheus":
			name = "otelprom"
		case "go.opentelemetry.io/otel/sdk/metric":
			name = "sdkmetric"
		}
		fmt.Fprintf(&src, "\t%s %q\n", name, path)
	}
	src.WriteString(")\n\n" + body.String())
	return src.String()
}

// exportData returns a lookup of the compiled export data of paths and
// everything they import, built by go list -export in the module.
func exportData(t *testing.T, paths []string) func(string) (io.ReadCloser, error) {
	files := map[string]string{}
	for _, line := range goList(t, append([]string{"-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}"}, paths...)...) {
		if path, file, ok := strings.Cut(line, " "); ok && file != "" {
			files[path] = file
		}
	}
	return func(path string) (io.ReadCloser, error) {
		file, ok := files[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}
}

// The README's Go snippets compile: each is type-checked against the
// module as it is, inside a function of the signature its comment gives
// (<!-- go: func(ctx context.Context, tr *track.Tracker) -->) for the
// names it takes from the prose around it. Unused variables and imports
// are the only errors allowed: a snippet shows a step, not a program.
func TestReadmeSnippetsCompile(t *testing.T) {
	all := snippets(t, "README.md")
	require.NotEmpty(t, all)
	var paths []string
	for _, p := range snippetImports {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	lookup := exportData(t, paths)
	for i, s := range all {
		t.Run(fmt.Sprintf("README.md:%d", s.line), func(t *testing.T) {
			src := s.source(i)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "snippet.go", src, parser.SkipObjectResolution)
			require.NoError(t, err, "README.md:%d does not parse:\n%s", s.line, src)
			var hard []error
			conf := types.Config{
				Importer: importer.ForCompiler(fset, "gc", lookup),
				Error: func(err error) {
					var te types.Error
					if errors.As(err, &te) && te.Soft {
						return // declared and not used, imported and not used
					}
					hard = append(hard, err)
				},
			}
			_, _ = conf.Check("snippet", fset, []*ast.File{f}, nil)
			require.Empty(t, hard, "README.md:%d does not compile:\n%s", s.line, src)
		})
	}
}
