// Command realtimewaits finds tests that wait on the real clock, for
// scripts/check-api.sh. A test waits on the event it expects, or fakes time
// in a testing/synctest bubble; a wait on real time makes a test slow on an
// idle machine and flaky on a busy one.
//
// Usage:
//
//	realtimewaits DIR...
//
// It reads every *_test.go file under each DIR (skipping testdata and
// folders that start with "." or "_") and reports, one a line as
// file:line: message:
//
//   - a call of time.Sleep, time.Tick, time.NewTicker or time.NewTimer;
//   - time.After, except as the case of a select that fails the test (a
//     bound on a hang: the test goes on only when the event came);
//   - Eventually, EventuallyWithT or Never (testify's polls) inside a for
//     loop: a polling loop around a poll.
//
// Code in a bubble is exempt: a function literal passed to synctest.Test or
// synctest.Run, and a function of the package whose every use lies in a
// bubble. An exception is a comment "//realtime:ok reason" on the line of
// the call or the line above it, with its reason.
//
// It exits with status 1 when it reports anything, 2 on a read or parse
// error.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: realtimewaits DIR...")
		os.Exit(2)
	}
	var findings []string
	for _, root := range os.Args[1:] {
		dirs, err := testDirs(root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "realtimewaits:", err)
			os.Exit(2)
		}
		for _, dir := range dirs {
			f, err := checkDir(dir)
			if err != nil {
				fmt.Fprintln(os.Stderr, "realtimewaits:", err)
				os.Exit(2)
			}
			findings = append(findings, f...)
		}
	}
	for _, f := range findings {
		fmt.Println(f)
	}
	if len(findings) > 0 {
		os.Exit(1)
	}
}

// testDirs returns the folders under root that hold a *_test.go file, sorted.
func testDirs(root string) ([]string, error) {
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, "_test.go") {
			seen[filepath.Dir(path)] = true
		}
		return nil
	})
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs, err
}

// file is one parsed test file with the local names of its imports.
type file struct {
	ast     *ast.File
	time    string // the name "time" is imported as, "" when it is not
	synctst string // the name "testing/synctest" is imported as
}

// checkDir checks the test files of one folder, which may hold two packages
// (p and p_test): a function's uses are looked up across both, which can
// only make more of them count as outside a bubble.
func checkDir(dir string) ([]string, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var files []file
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, file{ast: f, time: importName(f, "time"), synctst: importName(f, "testing/synctest")})
	}
	c := &checker{fset: fset, files: files}
	c.findBubbles()
	return c.report(), nil
}

// importName returns the name path is imported as in f, "" when it is not.
func importName(f *ast.File, path string) string {
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == path {
			if im.Name != nil {
				return im.Name.Name
			}
			return path[strings.LastIndex(path, "/")+1:]
		}
	}
	return ""
}

type checker struct {
	fset  *token.FileSet
	files []file
	// bubbles are the function literals passed to synctest.Test or Run.
	bubbles map[*ast.FuncLit]bool
	// funcs are the functions a use can name: a declared function "f", a
	// method "T.m", or a function literal bound to a local variable (by the
	// variable's object).
	funcs map[funcKey]bool
	// litKeys names the function literals bound to local variables.
	litKeys map[*ast.FuncLit]funcKey
	// results holds the type a declared function returns first, for
	// x := newT() in methodOf.
	results map[string]string
	// methods lists the types that declare each method name.
	methods map[string][]string
	// inBubble are the functions whose every use lies in a bubble.
	inBubble map[funcKey]bool
}

// funcKey names a function a use can name: a declared function or method
// by name ("f", "T.m"), or a function literal bound to a local variable by
// the variable's object.
type funcKey struct {
	name string
	//lint:ignore SA1019 the parser's objects resolve names without type information, so one pass reads the test files of every build tag at once
	obj *ast.Object
}

// declKey is how uses name a declared function: "f", or "T.m" for a method.
func declKey(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	return typeName(fd.Recv.List[0].Type) + "." + fd.Name.Name
}

// typeName returns the name of the type expression e (T, *T, T[X]), "" when
// it names none.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	case *ast.UnaryExpr:
		if e.Op == token.AND {
			return typeName(e.X)
		}
	case *ast.CompositeLit:
		return typeName(e.Type)
	}
	return ""
}

// stack is the path from a file to the node being visited.
type stack []ast.Node

// inside reports whether the top of s runs in a bubble, given inBubble:
// within a bubble literal, or within a function of inBubble.
func (c *checker) inside(s stack) bool {
	for i := len(s) - 1; i >= 0; i-- {
		switch n := s[i].(type) {
		case *ast.FuncLit:
			if c.bubbles[n] {
				return true
			}
			if k, ok := c.litKeys[n]; ok && c.inBubble[k] {
				return true
			}
		case *ast.FuncDecl:
			return c.inBubble[funcKey{name: declKey(n)}]
		}
	}
	return false
}

// walk calls fn on every node of every file with the path to it.
func (c *checker) walk(fn func(f file, n ast.Node, s stack)) {
	for _, f := range c.files {
		var s stack
		ast.Inspect(f.ast, func(n ast.Node) bool {
			if n == nil {
				s = s[:len(s)-1]
				return true
			}
			fn(f, n, s)
			s = append(s, n)
			return true
		})
	}
}

// boundLit returns the function literal obj, a local variable, is bound to
// by "obj := func..." or "var obj = func...", or nil.
//
//lint:ignore SA1019 the parser's objects resolve names without type information, so one pass reads the test files of every build tag at once; a guess that misses errs on the side of outside
func boundLit(obj *ast.Object) *ast.FuncLit {
	if obj == nil || obj.Kind != ast.Var {
		return nil
	}
	switch d := obj.Decl.(type) {
	case *ast.AssignStmt:
		for i, l := range d.Lhs {
			if id, ok := l.(*ast.Ident); ok && id.Obj == obj && i < len(d.Rhs) && len(d.Lhs) == len(d.Rhs) {
				lit, _ := d.Rhs[i].(*ast.FuncLit)
				return lit
			}
		}
	case *ast.ValueSpec:
		for i, id := range d.Names {
			if id.Obj == obj && i < len(d.Values) && len(d.Names) == len(d.Values) {
				lit, _ := d.Values[i].(*ast.FuncLit)
				return lit
			}
		}
	}
	return nil
}

// varType guesses the type name of the local variable obj from its
// declaration: a parameter or receiver of type T or *T, "x := T{...}",
// "x := &T{...}", or "x := newT(...)" for a declared newT returning T.
// It returns "" when it cannot tell.
//
//lint:ignore SA1019 the parser's objects resolve names without type information, so one pass reads the test files of every build tag at once; a guess that misses errs on the side of outside
func (c *checker) varType(obj *ast.Object) string {
	if obj == nil || obj.Kind != ast.Var {
		return ""
	}
	switch d := obj.Decl.(type) {
	case *ast.Field:
		return typeName(d.Type)
	case *ast.ValueSpec:
		if d.Type != nil {
			return typeName(d.Type)
		}
		for i, id := range d.Names {
			if id.Obj == obj && len(d.Names) == len(d.Values) {
				return c.exprType(d.Values[i])
			}
		}
	case *ast.AssignStmt:
		for i, l := range d.Lhs {
			if id, ok := l.(*ast.Ident); ok && id.Obj == obj {
				if len(d.Lhs) == len(d.Rhs) {
					return c.exprType(d.Rhs[i])
				}
				if i == 0 && len(d.Rhs) == 1 {
					return c.exprType(d.Rhs[0]) // x, err := newT()
				}
			}
		}
	}
	return ""
}

// exprType guesses the type name of e for varType.
func (c *checker) exprType(e ast.Expr) string {
	if call, ok := e.(*ast.CallExpr); ok {
		if id, ok := call.Fun.(*ast.Ident); ok {
			return c.results[id.Name]
		}
		return ""
	}
	return typeName(e)
}

func (c *checker) findBubbles() {
	c.bubbles = map[*ast.FuncLit]bool{}
	c.funcs = map[funcKey]bool{}
	c.litKeys = map[*ast.FuncLit]funcKey{}
	c.results = map[string]string{}
	c.methods = map[string][]string{}
	c.walk(func(f file, n ast.Node, _ stack) {
		switch n := n.(type) {
		case *ast.CallExpr:
			if f.synctst != "" && (isPkgCall(n, f.synctst, "Test") || isPkgCall(n, f.synctst, "Run")) {
				for _, a := range n.Args {
					if lit, ok := a.(*ast.FuncLit); ok {
						c.bubbles[lit] = true
					}
				}
			}
		case *ast.FuncDecl:
			k := funcKey{name: declKey(n)}
			c.funcs[k] = true
			if n.Recv != nil {
				c.methods[n.Name.Name] = append(c.methods[n.Name.Name], k.name)
			} else if n.Type.Results != nil && len(n.Type.Results.List) > 0 {
				c.results[n.Name.Name] = typeName(n.Type.Results.List[0].Type)
			}
		case *ast.Ident:
			if lit := boundLit(n.Obj); lit != nil {
				c.litKeys[lit] = funcKey{obj: n.Obj}
				c.funcs[funcKey{obj: n.Obj}] = true
			}
		}
	})
	// Each use of a function: a name, or a selector x.m for a method (of
	// x's type when varType tells it, else of every type with a method m,
	// which errs on the side of outside).
	uses := map[funcKey][]stack{}
	c.walk(func(_ file, n ast.Node, s stack) {
		var keys []funcKey
		switch n := n.(type) {
		case *ast.Ident:
			if len(s) > 0 {
				switch p := s[len(s)-1].(type) {
				case *ast.FuncDecl:
					if p.Name == n {
						return // the declaration itself
					}
				case *ast.SelectorExpr:
					if p.Sel == n {
						return // a method or a field, below
					}
				case *ast.AssignStmt:
					if boundLit(n.Obj) != nil {
						for _, l := range p.Lhs {
							if l == n {
								return // the binding itself
							}
						}
					}
				}
			}
			if n.Obj != nil && c.funcs[funcKey{obj: n.Obj}] {
				keys = []funcKey{{obj: n.Obj}}
			} else if (n.Obj == nil || n.Obj.Kind == ast.Fun) && c.funcs[funcKey{name: n.Name}] {
				keys = []funcKey{{name: n.Name}}
			}
		case *ast.SelectorExpr:
			owners := c.methods[n.Sel.Name]
			if len(owners) == 0 {
				return
			}
			if id, ok := n.X.(*ast.Ident); ok {
				if t := c.varType(id.Obj); t != "" && c.funcs[funcKey{name: t + "." + n.Sel.Name}] {
					owners = []string{t + "." + n.Sel.Name}
				}
			}
			for _, o := range owners {
				keys = append(keys, funcKey{name: o})
			}
		default:
			return
		}
		for _, k := range keys {
			uses[k] = append(uses[k], append(stack(nil), s...))
		}
	})
	// The greatest set of used functions whose uses all lie in a bubble or
	// in a function of the set.
	c.inBubble = map[funcKey]bool{}
	for k, us := range uses {
		if len(us) > 0 {
			c.inBubble[k] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for k := range c.inBubble {
			for _, s := range uses[k] {
				if !c.inside(s) {
					delete(c.inBubble, k)
					changed = true
					break
				}
			}
		}
	}
}

// isPkgCall reports whether call is pkg.name(...).
func isPkgCall(call *ast.CallExpr, pkg, name string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// failsTest reports whether stmts call something that ends or fails the
// test: t.Fatal and its kin, require.*, assert.Fail*, panic.
func failsTest(stmts []ast.Stmt) bool {
	found := false
	for _, st := range stmts {
		ast.Inspect(st, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return !found
			}
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				found = found || fn.Name == "panic"
			case *ast.SelectorExpr:
				switch fn.Sel.Name {
				case "Fatal", "Fatalf", "FailNow", "Fail", "Error", "Errorf", "Failf":
					found = true
				}
				if id, ok := fn.X.(*ast.Ident); ok && id.Name == "require" {
					found = true
				}
			}
			return !found
		})
	}
	return found
}

func (c *checker) report() []string {
	var out []string
	c.walk(func(f file, n ast.Node, s stack) {
		call, ok := n.(*ast.CallExpr)
		if !ok || c.inside(s) {
			return
		}
		var msg string
		if f.time != "" {
			for _, name := range []string{"Sleep", "Tick", "NewTicker", "NewTimer"} {
				if isPkgCall(call, f.time, name) {
					msg = "time." + name + " waits on the real clock"
				}
			}
			if isPkgCall(call, f.time, "After") && !guardCase(s) {
				msg = "time.After waits on the real clock (only as a select case that fails the test, a bound on a hang)"
			}
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && msg == "" {
			switch sel.Sel.Name {
			case "Eventually", "EventuallyWithT", "Never":
				if inLoop(s) {
					msg = sel.Sel.Name + " in a loop polls the real clock"
				}
			}
		}
		if msg == "" {
			return
		}
		pos := c.fset.Position(call.Pos())
		if allowed(c.fset, f.ast, pos.Line) {
			return
		}
		out = append(out, fmt.Sprintf("%s:%d: %s; wait on the event, or fake time with testing/synctest", pos.Filename, pos.Line, msg))
	})
	return out
}

// guardCase reports whether the time.After call atop s is a select case
// "case <-time.After(d):" whose body fails the test.
func guardCase(s stack) bool {
	// The path ends ... CommClause, ExprStmt, UnaryExpr(<-), and the call
	// itself is visited with s not yet holding it.
	if len(s) < 3 {
		return false
	}
	recv, ok := s[len(s)-1].(*ast.UnaryExpr)
	if !ok || recv.Op != token.ARROW {
		return false
	}
	if _, ok := s[len(s)-2].(*ast.ExprStmt); !ok {
		return false
	}
	cc, ok := s[len(s)-3].(*ast.CommClause)
	return ok && failsTest(cc.Body)
}

// inLoop reports whether the top of s lies in a for or range loop of the
// same function.
func inLoop(s stack) bool {
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i].(type) {
		case *ast.ForStmt, *ast.RangeStmt:
			return true
		case *ast.FuncLit, *ast.FuncDecl:
			return false
		}
	}
	return false
}

// allowed reports whether line, or the line above it, carries a comment
// "//realtime:ok reason" with a reason.
func allowed(fset *token.FileSet, f *ast.File, line int) bool {
	for _, cg := range f.Comments {
		for _, cm := range cg.List {
			l := fset.Position(cm.Pos()).Line
			if l != line && l != line-1 {
				continue
			}
			if reason, ok := strings.CutPrefix(cm.Text, "//realtime:ok "); ok && strings.TrimSpace(reason) != "" {
				return true
			}
		}
	}
	return false
}
